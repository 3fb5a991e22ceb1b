/**
 * Bounds per customer on the records whose lists are answered whole, not paged (the organization and
 * application lists, docs/api.md "Endpoints"; docs/security.md): a tenant cannot grow such an answer, nor
 * the time the server spends building it for every tenant, without end. Counted in the creating
 * transaction (committed records), so creates at the same moment may pass a bound by a few: a bound
 * on size, not a rule of the data.
 */
import { conflict } from '../../http/errors'
import type { Tx } from '../../storage/storage'

export const MAX_PARTNERS_PER_CUSTOMER = 1_000
export const MAX_APPLICATIONS_PER_CUSTOMER = 1_000

/** 409 when the customer already has its bound of partners, or of applications. */
export async function refuseBeyondLimit(tx: Tx, customerId: string, kind: 'partners' | 'applications'): Promise<void> {
  const limit = kind === 'partners' ? MAX_PARTNERS_PER_CUSTOMER : MAX_APPLICATIONS_PER_CUSTOMER
  const held =
    kind === 'partners'
      ? await tx.count('organizations', [{ field: 'parent_id', in: [customerId] }], limit)
      : await tx.count('applications', [{ field: 'organization_id', in: [customerId] }], limit)
  if (held >= limit) throw conflict(`too_many_${kind}`, `A customer has at most ${limit} ${kind}.`)
}
