/** State transitions shared by every resource: a no-op or a transition not allowed is 409. */
import type { RecordOf } from '../../storage/records'
import type { Storage } from '../../storage/storage'
import { conflict } from '../../http/errors'

type Stateful = 'organizations' | 'applications' | 'consumers' | 'installations' | 'enrollments'

export function transition<N extends Stateful>(
  storage: Storage,
  table: N,
  id: string,
  to: RecordOf<N>['state'],
  allowedFrom: readonly RecordOf<N>['state'][],
): Promise<RecordOf<N>> {
  return storage.transaction(async (tx) => {
    // Decided on the record as it is now, locked until the change commits.
    const current = (await tx.find(table, id, 'update'))!
    if (current.state === to) throw conflict('already_in_state', `It is already ${to}.`)
    if (!allowedFrom.includes(current.state)) throw conflict('invalid_transition', `It cannot become ${to} from ${current.state}.`)
    return tx.update(table, id, { state: to } as never)
  })
}
