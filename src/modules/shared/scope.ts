/**
 * List filters reduced to the caller's scope before anything is counted or enumerated (docs/security.md):
 * an identifier of another tenant's record is dropped here, so it matches nothing, and no answer
 * and no timing depends on what that tenant has. The storage relies on it (see `ListQuery.scope`).
 */
import type { Principal } from '../../http/auth'
import { otherReadableOrganizations, ownedBy, readableOrganization, reachesCustomer, reachesOrganization, type OwnedTable } from '../../http/access'
import type { RecordOf, TableName } from '../../storage/records'
import { all, then, type Condition, type EnrollmentLink, type Maybe, type Reader } from '../../storage/storage'

export interface IdFilter<N extends TableName> {
  /** What it filters on: a field of the listed records, or their enrollments (consumers, installations). */
  readonly on: { readonly field: keyof RecordOf<N> & string } | { readonly enrolled: EnrollmentLink }
  /**
   * What the identifiers name: records of a customer-owned table; `customers` (only customers own
   * records); `organizations`, those the caller reads (tokens belong to any).
   */
  readonly names: OwnedTable | 'customers' | 'organizations'
  /** The request's values; absent or empty: no filter. */
  readonly ids: readonly string[] | undefined
}

/** One `in` condition per filter that was sent, holding only identifiers inside the caller's scope. */
export function scopedConditions<N extends TableName>(reader: Reader, p: Principal, filters: readonly IdFilter<N>[]): Maybe<Condition<N>[]> {
  const sent = filters.filter((filter) => filter.ids !== undefined && filter.ids.length > 0)
  return then(all(sent.map((filter) => ownIds(reader, p, filter.names, filter.ids!))), (kept) =>
    sent.map((filter, i) => ({ ...filter.on, in: kept[i]! }) as Condition<N>),
  )
}

/**
 * `ids` whose record is inside the caller's scope (all of them for the vendor). The scope goes to the
 * storage (`within`), which drops another tenant's record from the same work as a missing one: none
 * is handed out, and none costs more than an unknown id (docs/security.md).
 */
function ownIds(reader: Reader, p: Principal, names: IdFilter<TableName>['names'], ids: readonly string[]): Maybe<readonly string[]> {
  const customerId = p.customerId
  if (customerId === null) return ids
  if (names === 'customers') return ids.filter((id) => id === customerId)
  if (names === 'organizations') {
    // The caller's own organization and customer need no read; any other only a customer's partner is.
    const others = ids.filter((id) => readableOrganization(p, id) !== undefined)
    return then(reader.findMany('organizations', others, otherReadableOrganizations(p)), (orgs) => {
      const partners = new Set(others.filter((_, i) => orgs[i] !== undefined && reachesOrganization(p, orgs[i]!)))
      return ids.filter((id) => partners.has(id) || readableOrganization(p, id) === undefined)
    })
  }
  return then(reader.findMany(names, ids, ownedBy(p)), (records) => ids.filter((_, i) => records[i] !== undefined && reachesCustomer(p, records[i]!.organization_id)))
}

/** A list request's paging as a query's. */
export const pageOf = (q: { readonly page?: number; readonly page_size: number }) => ({ number: q.page ?? 1, size: q.page_size })
