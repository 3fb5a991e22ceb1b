/** State transitions shared by every resource: a no-op or a transition not allowed is 409. */
import type { RecordOf } from '../../storage/records'
import type { Storage } from '../../storage/storage'
import { conflict } from '../../http/errors'
import { changeBy, customerIdOf, recordEvent, type Actor, type AuditAction } from './audit'

type Stateful = 'organizations' | 'applications' | 'consumers' | 'installations' | 'enrollments'

export interface Transition<N extends Stateful> {
  readonly table: N
  readonly id: string
  readonly to: RecordOf<N>['state']
  readonly allowedFrom: readonly RecordOf<N>['state'][]
  /** The event it records, e.g. `consumer.suspend`. */
  readonly action: AuditAction
}

export function transition<N extends Stateful>(storage: Storage, actor: Actor, change: Transition<N>): Promise<RecordOf<N>> {
  const { table, id, to, allowedFrom, action } = change
  return changeBy(actor, storage, async (tx) => {
    // Decided on the record as it is now, locked until the change commits.
    const current = (await tx.find(table, id, 'update'))!
    if (current.state === to) throw conflict('already_in_state', `It is already ${to}.`)
    if (!allowedFrom.includes(current.state)) throw conflict('invalid_transition', `It cannot become ${to} from ${current.state}.`)
    const changed = await tx.update(table, id, { state: to } as never)
    const customerId = table === 'organizations' ? customerIdOf(changed as RecordOf<'organizations'>) : (changed as { organization_id: string }).organization_id
    recordEvent(tx, actor, action, { target: id, customerId, before: current, after: changed })
    return changed
  })
}
