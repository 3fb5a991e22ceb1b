/**
 * Audit events (docs/api.md "Audit events"; README "Audit trail"). Every action a change performs is
 * recorded by one call to `recordEvent`, inside the change's own transaction: the event is durable
 * exactly when the change is, and a change that throws (a 4xx) or writes nothing records nothing.
 */
import type { Organization, RecordOf, TableName } from '../../storage/records'
import { then, type Maybe, type StateMark, type Storage, type Tx } from '../../storage/storage'
import { invalidToken, refusalOf } from './credential'
import type { Principal } from './principal'
import { changesOf } from '../../storage/audit-changes'

/**
 * Who makes a change: a token (with the request's trace id), or a command of the CLI (with the
 * storage's mark taken before it read anything, when it reads before it changes: `StateMark`).
 */
export type Actor = { readonly principal: Principal; readonly traceId: string } | { readonly cli: string; readonly since?: StateMark }

export const AUDIT_ACTIONS = [
  'organization.create',
  'organization.update',
  'organization.suspend',
  'organization.activate',
  'organization_environments.add',
  'organization_environments.remove',
  'organization_environments.set_default',
  'application.create',
  'application.update',
  'application.suspend',
  'application.activate',
  'application_environments.add',
  'application_environments.remove',
  'consumer.create',
  'consumer.suspend',
  'consumer.activate',
  'installation.create',
  'installation.update',
  'installation.suspend',
  'installation.verify',
  'enrollment.create',
  'enrollment.suspend',
  'enrollment.activate',
  'keyset.create',
  'token.create',
  'token.revoke',
  'vendor.init',
] as const
export type AuditAction = (typeof AUDIT_ACTIONS)[number]

/** The type of an action's target: its first word (`vendor.init`: the vendor organization). */
export const targetTypeOf = (action: AuditAction) => (action === 'vendor.init' ? 'organization' : action.slice(0, action.indexOf('.')))
export const TARGET_TYPES = [...new Set(AUDIT_ACTIONS.map(targetTypeOf))]

export interface EventInput {
  /** The changed record's id; the target's type is the action's first word (`vendor.init`: an organization). */
  readonly target: string
  /** The customer whose data changed: `customerIdOf` for organizations and tokens, `organization_id` for the rest. */
  readonly customerId: string | null
  /** The record before the change (null for a create) and after it, as stored: its `modified` is the event's time. */
  readonly before: RecordOf<TableName> | null
  readonly after: RecordOf<TableName>
}

/**
 * Records one action of the running transaction. Nothing waits for the insert (`Tx.appendEvent`):
 * in database mode it goes out with the COMMIT, and its failure fails the change.
 */
export function recordEvent(tx: Pick<Tx, 'appendEvent'>, actor: Actor, action: AuditAction, input: EventInput): void {
  const byToken = 'principal' in actor ? actor : null
  tx.appendEvent({
    // Time-ordered (UUIDv7, monotonic within the process): the events of one change, which share
    // their time, sort by id in the order they were recorded.
    event_id: Bun.randomUUIDv7(),
    action,
    target_type: targetTypeOf(action),
    target_id: input.target,
    actor_organization_id: byToken?.principal.organization.organization_id ?? null,
    actor_token_id: byToken?.principal.tokenId ?? null,
    actor_role: byToken?.principal.role ?? null,
    actor_cli: 'cli' in actor ? actor.cli : null,
    customer_id: input.customerId,
    changes: changesOf(input.before, input.after),
    trace_id: byToken?.traceId ?? null,
  }, input.after.modified)
}

/**
 * Runs `body` as one change made by `actor` (`Storage.transaction`): a request's change is refused
 * (503, nothing written) if a write was undone since the request read its token, which the change
 * rests on (`StateMark`: an activation of its organization that never became durable, say); a
 * command's likewise, since what it read first. A request's token is judged again inside the
 * change (`refusalOf`): revoked or suspended since the request arrived, the change is a 401 and
 * nothing is written. Its reads go out with the body's first statements (in database mode no
 * round trip of their own), and a 401 outranks what the body threw.
 */
export function changeBy<R>(actor: Actor, storage: Storage, body: (tx: Tx) => Promise<R>): Promise<R> {
  if (!('principal' in actor)) return storage.transaction(body, actor.since)
  const principal = actor.principal
  return storage.transaction(async (tx) => {
    const confirmed = Promise.resolve(confirmCredential(tx, storage, principal))
    confirmed.catch(() => {}) // awaited below, whatever the body does
    let result: R
    try {
      result = await body(tx)
    } catch (error) {
      await confirmed
      throw error
    }
    await confirmed
    return result
  }, principal.since)
}

/** Throws the 401 of `principal`'s token if, read inside the change, it may no longer act. */
function confirmCredential(tx: Tx, storage: Storage, principal: Principal): Maybe<void> {
  return then(tx.findCredential(principal.tokenId), (credential) => {
    const refusal = credential ? refusalOf(credential, storage.now()) : invalidToken()
    if (refusal) throw refusal
  })
}

/** The customer an organization's data belongs to: itself, a partner's customer, or none (the vendor). */
export function customerIdOf(org: Organization): string | null {
  if (org.organization_type === 'vendor') return null
  return org.organization_type === 'customer' ? org.organization_id : org.parent_id
}
