/**
 * A transaction's log record, the JSON payload that log-format.ts frames: `{lsn, puts, drops?}`,
 * each put the full image of a record (docs/storage.md "Audit events in the log").
 *
 * From data format 4, an audit event whose `changes` are exactly those of creating a record put in
 * the same log record (`changesOf(null, record)`: every stored field as `[null, value]`) is logged
 * without them, and replay rebuilds them from that record. A create's changes repeat the whole
 * record, so this halves what a create logs and the JSON work to write and read it. An event
 * logged with its `changes` (any other event, and every event of format 3) is replayed as it is.
 */
import { areChangesOfCreate, changesOf } from '../storage/audit-changes'
import { PRIMARY_KEY, type AuditEvent, type TableName } from '../storage/records'

export interface LogEntry {
  lsn: number
  puts: [string, Record<string, unknown>][]
  /** Records removed by retention (`Transaction.dropOldest`), by id, oldest first. */
  drops?: [string, string[]][]
}

/** The table of each target type of an event (src/modules/shared/audit.ts `targetTypeOf`). */
const TARGET_TABLES: Readonly<Record<string, TableName>> = {
  organization: 'organizations',
  application: 'applications',
  consumer: 'consumers',
  installation: 'installations',
  enrollment: 'enrollments',
  keyset: 'keysets',
  token: 'tokens',
}

/** The JSON text of a transaction's log record. */
export function logRecordText(lsn: number, puts: readonly (readonly [TableName, unknown])[], drops: readonly (readonly [TableName, string[]])[]): string {
  let logged = puts
  for (let i = 0; i < puts.length; i++) {
    if (puts[i]![0] !== 'audit_events') continue
    const event = puts[i]![1] as AuditEvent
    const created = createdRecordOf(puts as readonly (readonly [string, unknown])[], event)
    if (created === undefined || !areChangesOfCreate(event.changes, created)) continue
    if (logged === puts) logged = puts.slice()
    // JSON.stringify leaves out an undefined field.
    ;(logged as (readonly [TableName, unknown])[])[i] = ['audit_events', { ...event, changes: undefined }]
  }
  return JSON.stringify(drops.length > 0 ? { lsn, puts: logged, drops } : { lsn, puts: logged })
}

/**
 * Gives each audit event of a replayed log record that was logged without its `changes` the
 * changes of creating its target, from the record put beside it. Returns an error message for an
 * event without `changes` and without that record (never written so: damage).
 */
export function restoreCreateChanges(entry: LogEntry): string | undefined {
  for (const [table, record] of entry.puts) {
    if (table !== 'audit_events' || typeof record !== 'object' || record === null || Object.hasOwn(record, 'changes')) continue
    const created = createdRecordOf(entry.puts, record as unknown as AuditEvent)
    if (created === undefined) return `audit event ${String(record.event_id)} has no changes and no record they come from`
    record.changes = changesOf(null, created)
  }
  return undefined
}

/** The first record put of the event's target (its table, its primary key), if any. */
function createdRecordOf(puts: readonly (readonly [string, unknown])[], event: AuditEvent): object | undefined {
  const table = Object.hasOwn(TARGET_TABLES, event.target_type) ? TARGET_TABLES[event.target_type]! : undefined
  if (table === undefined) return undefined
  const key = PRIMARY_KEY[table]
  for (const [name, record] of puts) {
    if (name === table && typeof record === 'object' && record !== null && (record as Record<string, unknown>)[key] === event.target_id) return record as object
  }
  return undefined
}
