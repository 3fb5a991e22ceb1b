/**
 * A transaction's log record, the JSON payload that log-format.ts frames: `{lsn, puts, drops?}`,
 * each put a record's full image (docs/storage.md "Audit events in the log").
 *
 * From data format 4 an audit event is logged as a row, its fields' values in `ROW_FIELDS` order
 * without their names, then its `changes`; and when those are exactly the changes of creating a
 * record put in the same log record (`changesOf(null, record)`: every stored field as `[null,
 * value]`) they are left out, and replay rebuilds them from that record. A create's changes repeat
 * the whole record, so a create logs its record once instead of twice. An event logged as a record
 * (data format 3) is replayed as it is.
 */
import { areChangesOfCreate, changesOf } from '../storage/audit-changes'
import { PRIMARY_KEY, TARGET_TABLES, type AuditEvent, type TableName } from '../storage/records'

export interface LogEntry {
  lsn: number
  /** An audit event as a row until `restoreEvents` makes it a record. */
  puts: [string, Record<string, unknown>][]
  /** Records removed by retention (`Transaction.dropOldest`), by id, oldest first. */
  drops?: [string, string[]][]
}

/** An audit event's fields in its log row; `changes` follows them unless left out. */
const ROW_FIELDS = [
  'event_id',
  'action',
  'target_type',
  'target_id',
  'actor_organization_id',
  'actor_token_id',
  'actor_role',
  'actor_cli',
  'customer_id',
  'trace_id',
  'created',
  'modified',
] as const satisfies readonly Exclude<keyof AuditEvent, 'changes'>[]

/** The JSON text of a transaction's log record. */
export function logRecordText(lsn: number, puts: readonly (readonly [TableName, unknown])[], drops: readonly (readonly [TableName, string[]])[]): string {
  let logged = puts
  let createdRecordOf: CreatedRecordOf | undefined
  for (let i = 0; i < puts.length; i++) {
    if (puts[i]![0] !== 'audit_events') continue
    createdRecordOf ??= createdRecords(puts)
    if (logged === puts) logged = puts.slice()
    ;(logged as (readonly [TableName, unknown])[])[i] = ['audit_events', rowOf(puts[i]![1] as AuditEvent, createdRecordOf)]
  }
  return JSON.stringify(drops.length > 0 ? { lsn, puts: logged, drops } : { lsn, puts: logged })
}

function rowOf(event: AuditEvent, createdRecordOf: CreatedRecordOf): unknown[] {
  const row: unknown[] = ROW_FIELDS.map((field) => event[field])
  const created = createdRecordOf(event)
  if (created === undefined || !areChangesOfCreate(event.changes, created)) row.push(event.changes)
  return row
}

/**
 * Turns the audit event rows of a replayed log record back into records (in place), rebuilding the
 * changes left out of a create's. Returns what is wrong with a row that cannot be one (never written
 * so: damage).
 */
export function restoreEvents(entry: LogEntry): string | undefined {
  let createdRecordOf: CreatedRecordOf | undefined
  /** The changes of creating the event's target, from its record put beside it; false when there is none. */
  const changesOfCreate = (event: AuditEvent): AuditEvent['changes'] | false => {
    createdRecordOf ??= createdRecords(entry.puts)
    const created = createdRecordOf(event)
    return created === undefined ? false : changesOf(null, created)
  }
  const noChanges = (event: AuditEvent) => `audit event ${String(event.event_id)} has no changes and no record they come from`
  for (const put of entry.puts) {
    const row: unknown = put[1]
    if (put[0] !== 'audit_events') continue
    if (!Array.isArray(row)) {
      // A record: data format 3, whose events all carry their changes, or the first builds of
      // format 4 (e559aaa), which left a create's out as rows do (test/fixtures/README.md).
      if (typeof row !== 'object' || row === null || Object.hasOwn(row, 'changes')) continue
      const changes = changesOfCreate(row as AuditEvent)
      if (changes === false) return noChanges(row as AuditEvent)
      ;(row as Record<string, unknown>).changes = changes
      continue
    }
    if (row.length !== ROW_FIELDS.length && row.length !== ROW_FIELDS.length + 1) return `an audit event row of ${row.length} values`
    const event: Record<string, unknown> = {}
    for (let i = 0; i < ROW_FIELDS.length; i++) event[ROW_FIELDS[i]!] = row[i]
    if (row.length > ROW_FIELDS.length) event.changes = row[ROW_FIELDS.length]
    else {
      const changes = changesOfCreate(event as unknown as AuditEvent)
      if (changes === false) return noChanges(event as unknown as AuditEvent)
      event.changes = changes
    }
    put[1] = event
  }
  return undefined
}

/** The first record put of an event's target (its table, its primary key), if any. */
type CreatedRecordOf = (event: AuditEvent) => object | undefined

/** Above a few puts, a map: a search through every put for each event would be quadratic (a batch of a thousand events). */
const PUTS_SEARCHED = 16

function createdRecords(puts: readonly (readonly [string, unknown])[]): CreatedRecordOf {
  const tableOf = (event: AuditEvent): TableName | undefined => (Object.hasOwn(TARGET_TABLES, event.target_type) ? TARGET_TABLES[event.target_type as keyof typeof TARGET_TABLES] : undefined)
  const keyOf = (name: string, record: unknown) =>
    Object.hasOwn(PRIMARY_KEY, name) && typeof record === 'object' && record !== null ? (record as Record<string, unknown>)[PRIMARY_KEY[name as TableName]] : undefined
  if (puts.length <= PUTS_SEARCHED) {
    return (event) => {
      const table = tableOf(event)
      if (table === undefined) return undefined
      for (const [name, record] of puts) {
        if (name !== table) continue
        const key = keyOf(name, record)
        if (key !== undefined && key === event.target_id) return record as object
      }
      return undefined
    }
  }
  const first = new Map<string, Map<unknown, object>>()
  for (const [name, record] of puts) {
    const key = keyOf(name, record)
    if (key === undefined) continue
    let records = first.get(name)
    if (!records) first.set(name, (records = new Map()))
    if (!records.has(key)) records.set(key, record as object)
  }
  return (event) => {
    const table = tableOf(event)
    return table === undefined ? undefined : first.get(table)?.get(event.target_id)
  }
}
