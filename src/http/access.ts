/**
 * How a request reaches records: path and body identifiers, then the records they name, found with
 * the scope rules of src/modules/shared/scope.ts. Every handler reaches records through these
 * functions: a record out of the caller's scope is reported exactly like a missing one (404), and
 * scope is checked before role (403).
 */
import { UUID_ANY_CASE, type Organization, type RecordOf, type TableName, type Token } from '../storage/records'
import { then, type Maybe, type ParentLink, type Reader, type WithParent } from '../storage/storage'
import type { Principal } from '../modules/shared/principal'
import { isPartner, ownedBy, readableOrganization, readableOrganizations, reachesCustomer, reachesOrganization, type OwnedTable } from '../modules/shared/scope'
import * as v from 'valibot'
import { parseBody, type RequestBody } from './body'
import { badRequest, forbidden, notFound } from '../modules/shared/errors'

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

/**
 * Organization `id` if the caller `reaches` it, else 404 `what`. Read with the caller's scope as
 * the condition (`readableOrganization`): another tenant's organization costs what an unknown one does.
 */
function organizationInScope(reader: Reader, p: Principal, id: string, what = 'Organization', reaches = reachesOrganization): Maybe<Organization> {
  return then(reader.find('organizations', id, readableOrganization(p, id)), (org) => {
    if (!org || !reaches(p, org)) throw notFound(what)
    return org
  })
}

export function findOrganization(reader: Reader, p: Principal, rawId: string): Maybe<Organization> {
  return organizationInScope(reader, p, pathId(rawId, 'organization_id'))
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

export function authorize(allowed: boolean, what: string): void {
  if (!allowed) throw forbidden(`This token's role or organization may not ${what}.`)
}

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
  return then(organizationInScope(reader, p, id, 'Organization', namesOrganization), (org) => {
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
  return then(organizationInScope(reader, p, id, what, namesOrganization), () => undefined)
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
  return organizationInScope(reader, p, id)
}
