/**
 * The route shape of every state change (suspend, activate, verify): the record in scope (400 for a
 * malformed id, 404), the role (403), a body that is not JSON (400), then the change, answered with
 * the record's view and the trace id.
 */
import type { Principal } from '../modules/shared/principal'
import type { RequestBody } from './body'
import { ignoreBody } from './body'
import { authorize } from './access'
import { actorOf, traceIdOf } from './context'
import type { Actor } from '../modules/shared/audit'
import type { Maybe } from '../storage/storage'

export interface StateChange<R, A extends Record<string, unknown>> {
  /** The path parameter naming the record. */
  readonly param: string
  readonly find: (principal: Principal, id: string) => Maybe<R>
  readonly allowed: (principal: Principal, record: R) => boolean
  /** Completes "This token's role or organization may not …" in the 403. */
  readonly action: string
  readonly change: (record: R, actor: Actor) => Promise<R>
  /** The answer's body without the trace id, e.g. `{ consumer: consumerView(record) }`. */
  readonly answer: (record: R) => Maybe<A>
}

interface StateChangeContext {
  readonly principal: Principal
  readonly params: Record<string, string>
  readonly body: RequestBody | undefined
  readonly set: { headers: Record<string, unknown> }
}

export function stateChange<R, A extends Record<string, unknown>>(spec: StateChange<R, A>) {
  // Destructured parameters: Elysia reads them from the source to know what the context needs.
  return async ({ principal, params, body, set }: StateChangeContext): Promise<A & { trace_id: string }> => {
    const record = await spec.find(principal, params[spec.param]!)
    authorize(spec.allowed(principal, record), spec.action)
    ignoreBody(body)
    return { ...(await spec.answer(await spec.change(record, actorOf(principal, set)))), trace_id: traceIdOf(set) }
  }
}
