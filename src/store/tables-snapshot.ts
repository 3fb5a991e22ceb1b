import { TABLE_NAMES, type Tables } from './database'
import type { SnapshotData } from './snapshot-file'

/**
 * Every record of tables nothing changes meanwhile (a store being opened, or read by a command), as
 * snapshot data at `lsn`. A running store's snapshots go through its own point-in-time capture.
 */
export function snapshotOf(tables: Tables, lsn: number): SnapshotData {
  return { format: 1, lsn, meta: {}, tables: Object.fromEntries(TABLE_NAMES.map((name) => [name, tables[name].values()])) }
}
