/**
 * Bounds per customer on the records whose lists are answered whole, not paged (the organization and
 * application lists, CONTRACT section 5; docs/security.md): a tenant cannot grow such an answer, nor
 * the time the server spends building it for every tenant, without end. Counted beside the creating
 * transaction, so creates at the same moment may pass a bound by a few: a bound on size, not a rule
 * of the data.
 */
import { conflict } from '../../http/errors'
import type { Reader } from '../../storage/storage'

export const MAX_PARTNERS_PER_CUSTOMER = 1_000
export const MAX_APPLICATIONS_PER_CUSTOMER = 1_000

/** 409 when the customer already has `limit` partners, or applications. */
export async function refuseBeyondLimit(reader: Reader, customerId: string, kind: 'partners' | 'applications'): Promise<void> {
  const page = { number: 1, size: 1 }
  const { total } =
    kind === 'partners'
      ? await reader.list({ table: 'organizations', where: [{ field: 'parent_id', in: [customerId] }], page, order: 'asc' })
      : await reader.list({ table: 'applications', scope: customerId, where: [], page, order: 'asc' })
  const limit = kind === 'partners' ? MAX_PARTNERS_PER_CUSTOMER : MAX_APPLICATIONS_PER_CUSTOMER
  if (total >= limit) throw conflict(`too_many_${kind}`, `A customer has at most ${limit} ${kind}.`)
}
