/**
 * The scope and role rules of docs/api.md "Authentication, roles and scope", written once: which
 * organizations and customer-owned records a caller reaches, and what its role may change. The
 * HTTP finders (src/http/access.ts) and the list filters below apply them.
 */
import { sliceOf, type Principal } from './principal'
import type { Organization, RecordOf, TableName } from '../../storage/records'
import { all, then, type Condition, type EnrollmentLink, type FieldIn, type Maybe, type Reader } from '../../storage/storage'
import type { Slice } from '../../ops/turns'

export const isVendor = (p: Principal) => p.organization.organization_type === 'vendor'
export const isCustomer = (p: Principal) => p.organization.organization_type === 'customer'
export const isPartner = (p: Principal) => p.organization.organization_type === 'partner'

/** Organizations a token may read: the vendor all; a customer itself and its partners; a partner itself. */
export function reachesOrganization(p: Principal, org: Organization): boolean {
  if (isVendor(p)) return true
  if (isCustomer(p)) return org.organization_id === p.customerId || org.parent_id === p.customerId
  return org.organization_id === p.organization.organization_id
}

/** Records owned by a customer (applications, consumers, ...): the vendor all, others their customer's. */
export function reachesCustomer(p: Principal, customerId: string): boolean {
  return p.customerId === null || p.customerId === customerId
}

/**
 * The same rules as conditions for the storage (`Reader.find`'s `within`), which drops a record out
 * of scope from the same work as a missing one: the checks above then only confirm it. A record
 * read by id goes through one of these, so that no timing tells another tenant's ids from unknown
 * ones (docs/security.md).
 */
export const ownedBy = <N extends OwnedTable>(p: Principal): readonly FieldIn<N>[] | undefined =>
  p.customerId === null ? undefined : [{ field: 'organization_id', in: [p.customerId] } as FieldIn<N>]

/** The organizations a caller reads, in creation order: the vendor all; a customer itself then its partners; a partner itself. */
export function readableOrganizationRecords(reader: Reader, p: Principal, slice: Slice = sliceOf(p)): Maybe<readonly Organization[]> {
  if (isPartner(p)) return [p.organization]
  return then(reader.list({ table: 'organizations', where: isVendor(p) ? [] : otherReadableOrganizations(p), order: 'asc', slice }), (page) =>
    isCustomer(p) ? [p.organization, ...page.items] : page.items,
  )
}

/** The same by id; null for the vendor: all. */
export function readableOrganizations(reader: Reader, p: Principal): Maybe<string[] | null> {
  if (isVendor(p)) return null
  return then(readableOrganizationRecords(reader, p), (orgs) => orgs.map((org) => org.organization_id))
}

/** The organizations other than its own and its customer that a caller reads: a customer its partners, a partner none. */
export const otherReadableOrganizations = (p: Principal): readonly FieldIn<'organizations'>[] => [{ field: 'parent_id', in: isCustomer(p) ? [p.customerId!] : [] }]

/** Organization `id`, as `reachesOrganization` decides from the id alone (undefined: any) or with its `parent_id`. */
export function readableOrganization(p: Principal, id: string): readonly FieldIn<'organizations'>[] | undefined {
  if (isVendor(p) || id === p.customerId || id === p.organization.organization_id) return undefined
  return otherReadableOrganizations(p)
}

/** Tables of records owned by one customer (`organization_id`). */
export type OwnedTable = 'applications' | 'consumers' | 'installations' | 'enrollments'

/** The role table of docs/api.md "Authentication, roles and scope", one rule per kind of change. Reads need no rule: scope decides. */
export const may = {
  createOrganization: (p: Principal) => p.role === 'admin' && !isPartner(p),
  updateOrganization: (p: Principal) => p.role === 'admin' && !isPartner(p),
  /** The vendor: any organization (the vendor itself is a 409 later); a customer: its partners only. */
  changeOrganizationState: (p: Principal, target: Organization) =>
    p.role === 'admin' && (isVendor(p) || (isCustomer(p) && target.parent_id === p.customerId)),
  changeOrganizationEnvironments: (p: Principal) => p.role === 'admin' && !isPartner(p),
  changeApplications: (p: Principal) => (p.role === 'admin' || p.role === 'application_admin') && !isPartner(p),
  changeTenantData: (p: Principal) => p.role === 'admin' || p.role === 'application_admin',
  /** docs/api.md "Tokens": admins only, for the organizations they read; a partner's admin for none. */
  manageTokens: (p: Principal) => p.role === 'admin' && !isPartner(p),
  /** docs/api.md "Audit events": the vendor's and a customer's admins and viewers. */
  readAuditEvents: (p: Principal) => (p.role === 'admin' || p.role === 'viewer') && !isPartner(p),
} as const

/**
 * List filters are reduced to the caller's scope before anything is counted or enumerated (docs/security.md):
 * an identifier of another tenant's record is dropped here, so it matches nothing, and no answer
 * and no timing depends on what that tenant has. The storage relies on it (see `ListQuery.scope`).
 */
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
