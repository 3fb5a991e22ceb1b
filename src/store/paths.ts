/** Files of a data dir. */
export const SNAPSHOT_FILE = 'snapshot.json'
export const SECRET_FILE = 'secret'
