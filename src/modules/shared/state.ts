/** State transitions shared by every resource: a no-op or a transition not allowed is 409. */
import type { RecordOf } from '../../store/database'
import type { Store } from '../../store/store'
import { nowMicros } from '../../store/clock'
import { conflict } from '../../http/errors'

type Stateful = 'organizations' | 'applications' | 'consumers' | 'installations' | 'enrollments'

export function transition<N extends Stateful>(
  store: Store,
  table: N,
  id: string,
  to: RecordOf<N>['state'],
  allowedFrom: readonly RecordOf<N>['state'][],
): Promise<RecordOf<N>> {
  return store.commit((tx) => {
    const current = (store.tables[table] as unknown as { get(id: string): RecordOf<N> }).get(id)
    if (current.state === to) throw conflict('already_in_state', `It is already ${to}.`)
    if (!allowedFrom.includes(current.state)) throw conflict('invalid_transition', `It cannot become ${to} from ${current.state}.`)
    return tx.put(table, { ...current, state: to, modified: nowMicros() } as RecordOf<N>)
  })
}
