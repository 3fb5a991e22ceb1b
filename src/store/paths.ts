/** Files of a data dir. */
export const SNAPSHOT_FILE = 'snapshot.json'
/** The HMAC key of versions before recorded tokens: ignored now, never created (README "Tokens"). */
export const SECRET_FILE = 'secret'
