/**
 * Bounds on the records whose lists are answered whole, not paged (the organization and application
 * lists of a customer, the keyset list of an enrollment: docs/api.md "Endpoints"; docs/security.md):
 * a tenant cannot grow such an answer, nor the time the server spends building it for every tenant,
 * without end. Counted in the creating transaction once the owner (the customer, the enrollment) is
 * locked for update, so that creates at the same moment, on any instance, count one after the other
 * and never pass a bound (in database mode they passed it by a few when counted unlocked: review,
 * 2026-11-30). Only these creates take that lock; a customer's creates of anything else do not wait.
 */
import { conflict } from './errors'
import type { Maybe, Tx } from '../../storage/storage'

export const MAX_PARTNERS_PER_CUSTOMER = 1_000
export const MAX_APPLICATIONS_PER_CUSTOMER = 1_000
/**
 * The whole list is then about 200 KB, the size of any list's largest page; ten times as many made
 * every other tenant's reads 15 times slower while one tenant fetched it (docs/security.md).
 */
export const MAX_KEYSETS_PER_ENROLLMENT = 1_000

type Bounded = 'partners' | 'applications' | 'keysets'

/** Each bound: how many, whose (for the message), and how the owner's records are counted (up to the bound). */
const BOUNDS: Record<Bounded, { readonly limit: number; readonly owner: string; readonly count: (tx: Tx, ownerId: string, limit: number) => Maybe<number> }> = {
  partners: { limit: MAX_PARTNERS_PER_CUSTOMER, owner: 'A customer', count: (tx, id, limit) => tx.count('organizations', [{ field: 'parent_id', in: [id] }], limit) },
  applications: { limit: MAX_APPLICATIONS_PER_CUSTOMER, owner: 'A customer', count: (tx, id, limit) => tx.count('applications', [{ field: 'organization_id', in: [id] }], limit) },
  keysets: { limit: MAX_KEYSETS_PER_ENROLLMENT, owner: 'An enrollment', count: (tx, id, limit) => tx.count('keysets', [{ field: 'enrollment_id', in: [id] }], limit) },
}

/** How many of `kind` the owner (a customer; an enrollment for keysets) holds, up to its bound: sent at once, judged later (`refuseWhenFull`). */
export function countTowardsBound(tx: Tx, ownerId: string, kind: Bounded): Maybe<number> {
  return BOUNDS[kind].count(tx, ownerId, BOUNDS[kind].limit)
}

/** 409 `too_many_<kind>` when `held` is at the bound. */
export function refuseWhenFull(held: number, kind: Bounded): void {
  const { limit, owner } = BOUNDS[kind]
  if (held >= limit) throw conflict(`too_many_${kind}`, `${owner} has at most ${limit} ${kind}.`)
}

/**
 * Both, for a create that has nothing to ask together with the count: the owner customer locked for
 * update first (`lockOwner`), unless the caller has already done so.
 */
export async function refuseBeyondLimit(tx: Tx, ownerId: string, kind: Exclude<Bounded, 'keysets'>, lockOwner = true): Promise<void> {
  if (lockOwner) await tx.find('organizations', ownerId, 'update')
  refuseWhenFull(await countTowardsBound(tx, ownerId, kind), kind)
}
