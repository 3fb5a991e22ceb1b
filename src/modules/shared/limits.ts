/**
 * Bounds on the records whose lists are answered whole, not paged (the organization and application
 * lists of a customer, the keyset list of an enrollment: docs/api.md "Endpoints"; docs/security.md):
 * a tenant cannot grow such an answer, nor the time the server spends building it for every tenant,
 * without end. Counted in the creating transaction (committed records), so creates at the same moment
 * may pass a bound by a few (keysets cannot: their enrollment is locked): a bound on size, not a rule
 * of the data.
 */
import { conflict } from '../../http/errors'
import type { Tx } from '../../storage/storage'

export const MAX_PARTNERS_PER_CUSTOMER = 1_000
export const MAX_APPLICATIONS_PER_CUSTOMER = 1_000
/**
 * The whole list is then about 200 KB, the size of any list's largest page; ten times as many made
 * every other tenant's reads 15 times slower while one tenant fetched it (docs/security.md).
 */
export const MAX_KEYSETS_PER_ENROLLMENT = 1_000

/** 409 `too_many_<kind>` when the owner (a customer; an enrollment for keysets) already holds its bound. */
export async function refuseBeyondLimit(tx: Tx, ownerId: string, kind: 'partners' | 'applications' | 'keysets'): Promise<void> {
  const [limit, held, owner] =
    kind === 'partners'
      ? [MAX_PARTNERS_PER_CUSTOMER, await tx.count('organizations', [{ field: 'parent_id', in: [ownerId] }], MAX_PARTNERS_PER_CUSTOMER), 'A customer']
      : kind === 'applications'
        ? [MAX_APPLICATIONS_PER_CUSTOMER, await tx.count('applications', [{ field: 'organization_id', in: [ownerId] }], MAX_APPLICATIONS_PER_CUSTOMER), 'A customer']
        : [MAX_KEYSETS_PER_ENROLLMENT, await tx.count('keysets', [{ field: 'enrollment_id', in: [ownerId] }], MAX_KEYSETS_PER_ENROLLMENT), 'An enrollment']
  if (held >= limit) throw conflict(`too_many_${kind}`, `${owner} has at most ${limit} ${kind}.`)
}
