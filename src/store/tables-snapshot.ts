import { TABLE_NAMES } from '../storage/records'
import type { Tables } from './tables'
import type { SnapshotData } from './snapshot-file'

/**
 * Every record of tables nothing changes meanwhile (a store being opened, or read by a command), as
 * snapshot data at `lsn`. A running store's snapshots go through its own point-in-time capture.
 */
export function snapshotOf(tables: Tables, lsn: number): SnapshotData {
  // Audit events in their encoded form (docs/storage.md "Audit events in memory").
  const lines = (name: (typeof TABLE_NAMES)[number]) => (name === 'audit_events' ? tables.audit_events.capture().snapshotLines() : tables[name].values())
  return { format: 1, lsn, meta: {}, tables: Object.fromEntries(TABLE_NAMES.map((name) => [name, lines(name)])) }
}
