/**
 * Scope and role rules (docs/api.md), in one place. Every handler reaches
 * records through these functions: a record out of the caller's scope is reported exactly like a
 * missing one (404), and scope is checked before role (403).
 */
import { UUID_ANY_CASE, type Organization, type RecordOf, type TableName, type Token } from '../storage/records'
import { then, type FieldIn, type Maybe, type ParentLink, type Reader, type WithParent } from '../storage/storage'
import { sliceOf, type Principal } from './auth'
import * as v from 'valibot'
import { parseBody, type RequestBody } from './body'
import { badRequest, forbidden, notFound } from './errors'

export const UUID = UUID_ANY_CASE

/** A path identifier: 400 if it is not a UUID, answered in lowercase. */
export function pathId(raw: string, name: string): string {
  if (!UUID.test(raw)) throw badRequest('invalid_identifier', `${name} must be a UUID.`, [{ path: `params.${name}`, message: 'Invalid UUID' }])
  return raw.toLowerCase()
}

/**
 * A well-formed UUID that a JSON body names under `field`, lowercased; undefined otherwise (the
 * schema reports those). Lets a handler answer an unknown referenced record (404) before the rest
 * of the body is validated (400), in the order of docs/api.md "Status codes and errors".
 */
export function referencedId(body: RequestBody | undefined, field: string): string | undefined {
  if (body?.kind !== 'json' || typeof body.value !== 'object' || body.value === null) return undefined
  const value = (body.value as Record<string, unknown>)[field]
  return typeof value === 'string' && UUID.test(value) ? value.toLowerCase() : undefined
}

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

/** The organizations a caller reads, by id (a customer: itself and its partners); null for the vendor: all. */
export function readableOrganizations(reader: Reader, p: Principal): Maybe<string[] | null> {
  if (p.customerId === null) return null
  if (p.organization.organization_type === 'partner') return [p.organization.organization_id]
  const customerId = p.customerId
  return then(reader.list({ table: 'organizations', where: [{ field: 'parent_id', in: [customerId] }], order: 'asc', slice: sliceOf(p) }), (partners) => [
    customerId,
    ...partners.items.map((partner) => partner.organization_id),
  ])
}

/** The organizations other than its own and its customer that a caller reads: a customer its partners, a partner none. */
export const otherReadableOrganizations = (p: Principal): readonly FieldIn<'organizations'>[] => [{ field: 'parent_id', in: isCustomer(p) ? [p.customerId!] : [] }]

/** Organization `id`, as `reachesOrganization` decides from the id alone (undefined: any) or with its `parent_id`. */
export function readableOrganization(p: Principal, id: string): readonly FieldIn<'organizations'>[] | undefined {
  if (isVendor(p) || id === p.customerId || id === p.organization.organization_id) return undefined
  return otherReadableOrganizations(p)
}

export function findOrganization(reader: Reader, p: Principal, rawId: string): Maybe<Organization> {
  const id = pathId(rawId, 'organization_id')
  return then(reader.find('organizations', id, readableOrganization(p, id)), (org) => {
    if (!org || !reachesOrganization(p, org)) throw notFound('Organization')
    return org
  })
}

/**
 * A customer's virtual-environment settings: only customers have them; a partner token reaches none
 * (404 whatever the role), nor does a customer not enabled for them.
 */
export function findEnvironmentCustomer(reader: Reader, p: Principal, rawId: string): Maybe<Organization> {
  return then(findOrganization(reader, p, rawId), (org) => {
    if (isPartner(p) || org.organization_type !== 'customer' || !org.environments) throw notFound('Organization environments')
    return org
  })
}

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

export function authorize(allowed: boolean, what: string): void {
  if (!allowed) throw forbidden(`This token's role or organization may not ${what}.`)
}

/** Tables of records owned by one customer (`organization_id`). */
export type OwnedTable = 'applications' | 'consumers' | 'installations' | 'enrollments'

/** A customer-owned record by path id: 400 malformed, 404 missing or out of scope. */
export function findOwned<N extends OwnedTable>(reader: Reader, table: N, p: Principal, rawId: string, idName: string, what: string): Maybe<RecordOf<N>> {
  return findOwnedById(reader, table, p, pathId(rawId, idName), what)
}

/** The same, for an id already known to be a well-formed lowercase UUID (from a body). */
export function findOwnedById<N extends OwnedTable>(reader: Reader, table: N, p: Principal, id: string, what: string): Maybe<RecordOf<N>> {
  return then(reader.find(table, id, ownedBy<N>(p)), (record) => owned(record, p, what))
}

/**
 * A customer-owned record by path id with the record that `parent` names (an enrollment and its
 * application), in one read; 400 malformed, 404 missing or out of scope, as `findOwned`.
 */
export function findOwnedWithParent<N extends OwnedTable, P extends TableName>(
  reader: Reader,
  table: N,
  p: Principal,
  rawId: string,
  idName: string,
  what: string,
  parent: ParentLink<N, P>,
): Maybe<WithParent<N, P>> {
  return findOwnedWithParentById(reader, table, p, pathId(rawId, idName), what, parent)
}

/** The same, for an id already known to be a well-formed lowercase UUID (from a body). */
export function findOwnedWithParentById<N extends OwnedTable, P extends TableName>(
  reader: Reader,
  table: N,
  p: Principal,
  id: string,
  what: string,
  parent: ParentLink<N, P>,
): Maybe<WithParent<N, P>> {
  return then(reader.findWithParent(table, id, parent, ownedBy<N>(p)), (found) => (owned(found?.record, p, what), found!))
}

/** The record if the caller reaches it, else 404: a record out of scope is answered as a missing one. */
function owned<N extends OwnedTable>(record: RecordOf<N> | undefined, p: Principal, what: string): RecordOf<N> {
  if (!record || !reachesCustomer(p, record.organization_id)) throw notFound(what)
  return record
}

/** Organizations a body may name: those the caller reads, and a partner's own customer. */
function namesOrganization(p: Principal, org: Organization): boolean {
  return reachesOrganization(p, org) || (org.organization_type === 'customer' && reachesCustomer(p, org.organization_id))
}

/**
 * The customer a body names (`organization_id` of an application, consumer or installation):
 * 404 if unknown or out of the caller's scope, 400 if it is in scope but not a customer.
 */
export function customerNamed(reader: Reader, p: Principal, id: string): Maybe<Organization> {
  return then(reader.find('organizations', id, readableOrganization(p, id)), (org) => {
    if (!org || !namesOrganization(p, org)) throw notFound('Organization')
    if (org.organization_type !== 'customer') {
      throw badRequest('not_a_customer', 'organization_id must name a customer organization.', [{ path: 'body.organization_id', message: 'Must name a customer' }])
    }
    return org
  })
}

/**
 * The organization a POST body names under `field` (`organization_id`, or a new organization's
 * `parent_id`), checked before the role and the rest of the body: an unknown or out-of-scope
 * record is 404 whatever the role (docs/api.md "Status codes and errors": 404 outranks 403 and a bad body).
 * Whether it is a customer is a body question, answered later.
 */
export function checkNamedOrganization(reader: Reader, p: Principal, body: RequestBody | undefined, field = 'organization_id', what = 'Organization'): Maybe<void> {
  const id = referencedId(body, field)
  if (id === undefined) return
  return then(reader.find('organizations', id, readableOrganization(p, id)), (org) => {
    if (!org || !namesOrganization(p, org)) throw notFound(what)
  })
}

/**
 * `checks()` (the role, then the body) with the order of docs/api.md "Status codes and errors" kept without a read on the
 * way to a success: when they fail, `named()` is asked first whether the record the body names is
 * missing (it throws the 404 that outranks their 403 or 400). When they pass, the change itself
 * must find the named record (inside its transaction, 404 if it is missing): one read fewer per
 * create (docs/storage.md, "Round trips").
 */
export function namedRecordFirst<T>(named: () => Maybe<unknown>, checks: () => T): Maybe<T> {
  try {
    return checks()
  } catch (error) {
    return then(named(), () => {
      throw error
    })
  }
}

/**
 * The body of a create that may name its organization (`organization_id`: applications, consumers,
 * installations), in the order of docs/api.md "Status codes and errors": the named organization's 404, then the role's
 * 403 (`allowed`, for `what`), then the body's 400 (`namedRecordFirst`).
 */
export function createBody<S extends v.GenericSchema>(reader: Reader, p: Principal, body: RequestBody | undefined, allowed: boolean, what: string, schema: S): Maybe<v.InferOutput<S>> {
  return namedRecordFirst(
    () => checkNamedOrganization(reader, p, body),
    () => (authorize(allowed, what), parseBody(schema, body)),
  )
}

/** The customer new consumers and installations go to: the token's, or for the vendor the one named. */
export function owningCustomer(reader: Reader, p: Principal, id: string | undefined): Maybe<Organization> {
  if (id !== undefined) return customerNamed(reader, p, id)
  if (p.customerId === null) {
    throw badRequest('organization_required', 'organization_id (the customer) is required for vendor tokens.', [{ path: 'body.organization_id', message: 'Required' }])
  }
  return then(reader.find('organizations', p.customerId), (customer) => customer!)
}

/** A token by path id, in scope when its organization is one the caller reads: 400 malformed, 404 otherwise. */
export function findToken(reader: Reader, p: Principal, rawId: string): Maybe<Token> {
  const id = pathId(rawId, 'token_id')
  // The token with its organization in one read, and only if that organization is one the caller
  // reads (`within`, like every read by id): another tenant's token costs what an unknown one does.
  return then(readableOrganizations(reader, p), (readable) =>
    then(reader.findWithParent('tokens', id, { field: 'organization_id', table: 'organizations' }, readable === null ? undefined : [{ field: 'organization_id', in: readable }]), (found) => {
      if (!found || !found.parent) throw notFound('Token')
      return found.record
    }),
  )
}

/**
 * The organization a new token is for (`organization_id` of POST /api/tokens): one the caller reads,
 * else 404, checked before the role and the rest of the body like every POST. Undefined when the
 * body names none (the body's validation reports it).
 */
export function tokenOrganization(reader: Reader, p: Principal, body: RequestBody | undefined): Maybe<Organization | undefined> {
  const id = referencedId(body, 'organization_id')
  if (id === undefined) return undefined
  return then(reader.find('organizations', id, readableOrganization(p, id)), (org) => {
    if (!org || !reachesOrganization(p, org)) throw notFound('Organization')
    return org
  })
}
