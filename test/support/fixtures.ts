/**
 * The records the HTTP tests build and read, once for every resource: the usual tenants, creating
 * or reading a record as the vendor, and the problem-body check. Each takes the harness, so it
 * serves both stores (test/support/harness.ts). Who may do what (the role table of docs/api.md
 * "Authentication, roles and scope") is checked in one place: test/http/authorization-matrix.test.ts.
 */
import { expect } from 'bun:test'
import type { ApiResponse, Harness } from './harness'
import { UUID_LOWERCASE } from '../../src/storage/records'
import { newClientKey } from './random'

/** An RFC 9457 problem body with `status`, the trace id of its header, and `code` when given. */
export function expectProblem(res: ApiResponse, status: number, code?: string) {
  expect({ status: res.status, body: res.body }).toMatchObject({ status, body: { status, type: 'about:blank' } })
  expect(res.headers.get('content-type')).toBe('application/problem+json')
  expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
  if (code) expect(res.body.code).toBe(code)
}

export const TIMESTAMP = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{6} \+00:00$/
/** Identifiers are answered lowercase: the storage's pattern. */
export const UUID_LOWER = UUID_LOWERCASE

/** Microseconds of an answered timestamp (docs/api.md "Conventions" format). */
export const timestampMicros = (text: string) => Date.parse(`${text.slice(0, 10)}T${text.slice(11, 23)}Z`) * 1000 + Number(text.slice(23, 26))

/** The fields of an enrollment's view (docs/api.md "Enrollments"), sorted. */
export const ENROLLMENT_KEYS = [
  'active_keyset_id',
  'application_id',
  'client_enclave_key',
  'client_storage_key_shares',
  'consumer_id',
  'created',
  'enrollment_id',
  'environment',
  'installation_id',
  'modified',
  'nickname',
  'state',
]

type Environments = { default: string; supported: string }

/** The vendor V; customers A and B, each with partner AP or BP. */
export interface Tenants {
  V: string
  A: string
  AP: string
  B: string
  BP: string
}

/** The usual tenants; A or B is enabled for virtual environments when `environments` says so. */
export async function tenants(h: Harness, environments: { A?: Environments; B?: Environments } = {}): Promise<Tenants> {
  const A = await h.createCustomer('A', environments.A)
  const AP = await h.createPartner(A, 'AP')
  const B = await h.createCustomer('B', environments.B)
  const BP = await h.createPartner(B, 'BP')
  return { V: h.vendorId, A, AP, B, BP }
}

/** A new application of `organizationId` (201 asserted), created with `token` (the vendor's by default). */
export async function createApplication(h: Harness, organizationId: string, extra: Record<string, unknown> = {}, token?: string) {
  const res = await h.request('POST', '/api/applications', { token, body: { organization_id: organizationId, description: 'App', ...extra } })
  expect(res.status).toBe(201)
  return res.body.application as Record<string, string>
}

/** The id of a new application; `allowed` its environments (comma-separated), else the customer's default. */
export async function createApplicationId(h: Harness, organizationId: string, allowed?: string): Promise<string> {
  return (await createApplication(h, organizationId, allowed ? { allowed_environments: allowed } : {})).application_id!
}

/** A consumer of `customer`, created with the vendor token. */
export async function createConsumer(h: Harness, customer: string, id: string = crypto.randomUUID()) {
  const res = await h.request('POST', '/api/consumers', { body: { consumer_id: id, organization_id: customer } })
  expect(res.status).toBe(201)
  return res.body.consumer as Record<string, string>
}

/** An installation of `customer`, created with the vendor token. */
export async function createInstallation(h: Harness, customer: string, description = 'Pixel 8') {
  const res = await h.request('POST', '/api/installations', { body: { installation_id: crypto.randomUUID(), description, organization_id: customer } })
  expect(res.status).toBe(201)
  return res.body.installation as Record<string, string>
}

export interface EnrollmentBody {
  enrollment_id: string
  consumer_id: string
  installation_id: string
  application_id: string
  environment: string
  installation_description: string
}

/** A body for POST /api/enrollments with new identifiers. */
export function enrollmentBody(applicationId: string, environment: string, extra: Partial<EnrollmentBody> = {}): EnrollmentBody {
  return {
    enrollment_id: crypto.randomUUID(),
    consumer_id: crypto.randomUUID(),
    installation_id: crypto.randomUUID(),
    application_id: applicationId,
    environment,
    installation_description: 'device',
    ...extra,
  }
}

/** A new enrollment (201 asserted) of a new consumer and installation. */
export async function enroll(h: Harness, applicationId: string, environment: string) {
  const res = await h.request('POST', '/api/enrollments', { body: enrollmentBody(applicationId, environment) })
  expect(res.status).toBe(201)
  return res.body.enrollment as Record<string, string | null>
}

const SINGULAR = { organizations: 'organization', applications: 'application', consumers: 'consumer', installations: 'installation', enrollments: 'enrollment' } as const

/** The record as the vendor sees it (200 asserted). */
export async function readAsVendor(h: Harness, resource: keyof typeof SINGULAR, id: string) {
  const res = await h.request('GET', `/api/${resource}/${id}`)
  expect(res.status).toBe(200)
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return res.body[SINGULAR[resource]] as Record<string, any>
}

/**
 * A customer with records of every kind: its partner, an application in the default environment
 * (`app`) and one in every environment (`app2`), and an enrollment in `app2` with a keyset, of a new
 * consumer and installation. `withEnvironments`: the customer is enabled for DEV and PROD (default PROD).
 */
export async function populatedTenant(h: Harness, name: string, withEnvironments: boolean) {
  const customer = await h.createCustomer(name, withEnvironments ? { default: 'PROD', supported: 'DEV,PROD' } : undefined)
  const partner = await h.createPartner(customer, `${name} partner`)
  const app = (await requestOk(h, 'POST', '/api/applications', { organization_id: customer, description: `${name} app` })).application.application_id as string
  const app2 = (
    await requestOk(h, 'POST', '/api/applications', { organization_id: customer, description: `${name} app2`, ...(withEnvironments ? { allowed_environments: 'dev,prod' } : {}) })
  ).application.application_id as string
  const body = enrollmentBody(app2, withEnvironments ? 'PROD' : 'PRODUCTION', { installation_description: `${name} phone` })
  await requestOk(h, 'POST', '/api/enrollments', body)
  await requestOk(h, 'POST', `/api/enrollments/${body.enrollment_id}/keysets`, { client_enclave_key: newClientKey() })
  return { customer, partner, app, app2, consumer: body.consumer_id, installation: body.installation_id, enrollment: body.enrollment_id }
}

/**
 * `template` (a route's path, `/api/consumers/:consumer_id`) with each parameter the id of
 * `tenant`'s record of that kind (`populatedTenant`; `token_id`: `tokenId`, a token of the customer).
 */
export function pathOfTenant(template: string, tenant: Awaited<ReturnType<typeof populatedTenant>>, tokenId: string): string {
  const ids: Record<string, string> = {
    organization_id: tenant.customer,
    application_id: tenant.app,
    consumer_id: tenant.consumer,
    installation_id: tenant.installation,
    enrollment_id: tenant.enrollment,
    token_id: tokenId,
  }
  return template.replace(/:([a-z_]+)/g, (_, name: string) => ids[name] ?? `<no record for ${name}>`)
}

/** What requestOk calls: the harness, or a server over HTTP (server-process.ts `httpCaller`). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface Caller<A extends { readonly status: number; readonly body: any }> {
  request(method: string, path: string, init: { body?: unknown; token?: string }): Promise<A>
}

/** The answer of a request that must succeed (200 or 201); anything else throws with the answer. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function responseOk<A extends { readonly status: number; readonly body: any }>(caller: Caller<A>, method: string, path: string, body?: unknown, token?: string): Promise<A> {
  const res = await caller.request(method, path, { body, token })
  if (res.status !== 200 && res.status !== 201) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`)
  return res
}

/** The body of a request that must succeed (`responseOk`). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function requestOk<A extends { readonly status: number; readonly body: any }>(caller: Caller<A>, method: string, path: string, body?: unknown, token?: string): Promise<A['body']> {
  return (await responseOk(caller, method, path, body, token)).body
}

/** A new P-256 public key as a client sends it for a keyset (the standard base64 of its SPKI DER), and in all its forms. */
export { newClientKey as p256PublicKey, p256Key } from './random'

