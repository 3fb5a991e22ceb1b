/**
 * A change of one stored record by an actor, the shape every update and state transition shares:
 * decided on the record as it is now (locked until the change commits), written, its audit event
 * recorded in the same transaction.
 */
import { TARGET_TABLES, type RecordOf, type TableName } from '../../storage/records'
import type { Changes, Maybe, Storage, Tx } from '../../storage/storage'
import { conflict } from './errors'
import { changeBy, customerIdOf, recordEvent, type Actor, type AuditAction } from './audit'

/** The tables of records that are changed in place, each owned by a customer or one itself. */
type Changeable = 'organizations' | 'applications' | 'consumers' | 'installations' | 'enrollments'

/**
 * Changes record `id` of `table` as `decide` says, given the record as it is now: the fields to
 * set, or null when nothing changes (the record is answered as it is: nothing written, no event).
 * `decide` may refuse by throwing.
 */
export function changeRecord<N extends Changeable>(
  storage: Storage,
  actor: Actor,
  table: N,
  id: string,
  action: AuditAction,
  decide: (current: RecordOf<N>, tx: Tx) => Maybe<Changes<N> | null>,
): Promise<RecordOf<N>> {
  return changeBy(actor, storage, async (tx) => {
    const current = (await tx.find(table, id, 'update'))!
    const changes = await decide(current, tx)
    if (changes === null) return current
    const changed = await tx.update(table, id, changes)
    const customerId = table === 'organizations' ? customerIdOf(changed as RecordOf<'organizations'>) : (changed as { organization_id: string }).organization_id
    recordEvent(tx, actor, action, { target: id, customerId, before: current, after: changed })
    return changed
  })
}

/** The verb of the action that brings a record to a state (`consumer.suspend`, `installation.verify`). */
const VERBS = { active: 'activate', suspended: 'suspend', verified: 'verify' } as const
/** The target type of a table's records: `TARGET_TABLES` the other way round. */
const TARGET_TYPE_OF = Object.fromEntries(Object.entries(TARGET_TABLES).map(([type, table]) => [table, type])) as Record<TableName, string>

/**
 * Brings a record to the state `to`, from any other (docs/api.md "Endpoints": installations suspend
 * from unregistered or verified, verify from unregistered or suspended): a record already in it is
 * `409 already_in_state`, as every no-op transition is (docs/api.md).
 */
export function transition<N extends Changeable>(storage: Storage, actor: Actor, table: N, id: string, to: RecordOf<N>['state'] & keyof typeof VERBS): Promise<RecordOf<N>> {
  const action = `${TARGET_TYPE_OF[table]}.${VERBS[to]}` as AuditAction
  return changeRecord(storage, actor, table, id, action, (current) => {
    if (current.state === to) throw conflict('already_in_state', `It is already ${to}.`)
    return { state: to } as Changes<N>
  })
}
