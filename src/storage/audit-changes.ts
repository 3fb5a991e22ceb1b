/**
 * An audit event's `changes` (docs/api.md "Audit events"), the one rule for both stores: built here by
 * `recordEvent` (src/modules/shared/audit.ts), and rebuilt by the embedded store's log replay for a
 * create, whose log record leaves them out (docs/storage.md "Audit events in the log").
 */
import { formatTimestamp } from '../store/clock'

/** Never in an event, not even as a hash (docs/api.md "Audit events"). */
const SECRET_FIELDS: ReadonlySet<string> = new Set(['api_key_hash', 'token_hash'])
/** Stored as microseconds, shown in the API's timestamp format like every other time. */
const TIMESTAMP_FIELDS: ReadonlySet<string> = new Set(['created', 'modified', 'expires'])

export type FieldChanges = Record<string, [unknown, unknown]>

/**
 * The record that the changes of each create were built from: when that very record is logged
 * beside its event, the changes need no comparison to be known to be its (`areChangesOfCreate`).
 */
const builtFrom = new WeakMap<object, object>()

/** A create: every stored field as [null, value]; a change: the fields that differ, [before, after]. */
export function changesOf(before: object | null, after: object): FieldChanges {
  const changes: FieldChanges = {}
  const now = after as Record<string, unknown>
  if (before === null) {
    for (const field in now) if (!SECRET_FIELDS.has(field)) changes[field] = [null, shown(field, now[field])]
    builtFrom.set(changes, after)
    return changes
  }
  const was = before as Record<string, unknown>
  for (const field in now) {
    const value = now[field]
    if (!SECRET_FIELDS.has(field) && !Bun.deepEquals(was[field], value)) changes[field] = [shown(field, was[field] ?? null), shown(field, value)]
  }
  return changes
}

/**
 * Whether `changes` are exactly `changesOf(null, record)` and will be again for `record` read back
 * from its JSON: `changesOf` built them from this very record (records are never changed in place),
 * and no field of the record is undefined (JSON would leave it out). Anything else (changes built
 * by hand or from another object, a record changed again in the same transaction) is logged as is.
 */
export function areChangesOfCreate(changes: object, record: object): boolean {
  if (builtFrom.get(changes) !== record) return false
  for (const field in record) if ((record as Record<string, unknown>)[field] === undefined) return false
  return true
}

const shown = (field: string, value: unknown) => (TIMESTAMP_FIELDS.has(field) && typeof value === 'number' ? formatTimestamp(value) : value)
