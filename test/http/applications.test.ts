/**
 * Applications over HTTP: list, view, register, update, suspend, activate; exact field sets,
 * application_id and allowed_environments (docs/api.md "Applications"). Who may do each (every role
 * and scope of docs/api.md "Authentication, roles and scope"): authorization-matrix.test.ts; 404
 * like a missing id: isolation.test.ts. (The 401 of a suspended customer's tokens: auth.test.ts, for every route.)
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { MAX_APPLICATIONS_PER_CUSTOMER } from '../../src/modules/shared/limits'
import { hashToken } from '../../src/auth/tokens'
import { createHarness, type Harness } from '../support/harness'
import { createApplication, enrollmentBody, readAsVendor, tenants, TIMESTAMP, UUID_LOWER, type Tenants, expectProblem } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// helpers

const KEYS_ENABLED = ['allowed_environments', 'application_id', 'created', 'description', 'modified', 'organization_id', 'state']
const KEYS_PLAIN = KEYS_ENABLED.filter((k) => k !== 'allowed_environments')

/** A: enabled for DEV, PROD, TEST (default PROD), partner AP. B: not enabled, partner BP. */
const world = () => tenants(h, { A: { default: 'prod', supported: 'test,prod,dev' } })

/** An enrollment in `environment` proves the application has it (it is 400 otherwise). */
async function enrollStatus(applicationId: string, environment: string) {
  return (await h.request('POST', '/api/enrollments', { body: enrollmentBody(applicationId, environment) })).status
}

// ---------------------------------------------------------------------------------------------
// POST /api/applications

describe('POST /api/applications', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('201 with the record, host_url and api_key; allowed_environments defaults to the customer default', async () => {
    const res = await h.request('POST', '/api/applications', { body: { organization_id: w.A, description: 'Mobile banking' } })
    expect(res.status).toBe(201)
    expect(Object.keys(res.body).sort()).toEqual(['application', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const app = res.body.application
    expect(Object.keys(app).sort()).toEqual([...KEYS_ENABLED, 'api_key', 'host_url'].sort())
    expect(app).toMatchObject({ organization_id: w.A, description: 'Mobile banking', allowed_environments: 'PROD', state: 'active', host_url: 'http://keyward.test' })
    expect(app.application_id).toMatch(UUID_LOWER)
    expect(app.created).toMatch(TIMESTAMP)
    expect(app.modified).toBe(app.created)
    expect(typeof app.api_key).toBe('string')
    expect(app.api_key.length).toBeGreaterThanOrEqual(20)
    // It carries a secret: no cache may keep it (docs/security.md).
    expect(res.headers.get('cache-control')).toBe('no-store')
  })

  test('api_key is new for every application and never shown again', async () => {
    const one = await createApplication(h, w.A)
    const two = await createApplication(h, w.A)
    expect(one.api_key).not.toBe(two.api_key)
    const view = await h.request('GET', `/api/applications/${one.application_id}`)
    expect(Object.keys(view.body.application).sort()).toEqual(KEYS_ENABLED)
    const list = await h.request('GET', '/api/applications')
    const listed = list.body.applications.find((a: { application_id: string }) => a.application_id === one.application_id)
    expect(Object.keys(listed).sort()).toEqual(KEYS_ENABLED)
    for (const response of [view, list]) expect(JSON.stringify(response.body)).not.toContain(one.api_key)
    // Kept only as a hash (docs/api.md "Conventions"), its SHA-256.
    const stored = await h.storage.find('applications', one.application_id!)
    expect(stored?.api_key_hash).toBe(hashToken(one.api_key!))
    expect(JSON.stringify(stored)).not.toContain(one.api_key!)
  })

  test('a customer not enabled for virtual environments: allowed_environments omitted, PRODUCTION implicit', async () => {
    const app = await createApplication(h, w.B)
    expect(Object.keys(app).sort()).toEqual([...KEYS_PLAIN, 'api_key', 'host_url'].sort())
    expect(Object.keys(await readAsVendor(h, 'applications', app.application_id!)).sort()).toEqual(KEYS_PLAIN)
    expect(await enrollStatus(app.application_id!, 'production')).toBe(201)
    expect(await enrollStatus(app.application_id!, 'DEV')).toBe(400)
    // PRODUCTION may also be named explicitly; nothing else can.
    const explicit = await createApplication(h, w.B, { allowed_environments: 'production' })
    expect(explicit.allowed_environments).toBeUndefined()
    expect(await enrollStatus(explicit.application_id!, 'PRODUCTION')).toBe(201)
    expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: w.B, description: 'x', allowed_environments: 'DEV' } }), 400)
  })

  test('allowed_environments as a comma-separated string and as an array, any case, sorted without duplicates', async () => {
    expect((await createApplication(h, w.A, { allowed_environments: 'test, dev' })).allowed_environments).toBe('DEV,TEST')
    expect((await createApplication(h, w.A, { allowed_environments: ['Test', 'dev', 'DEV'] })).allowed_environments).toBe('DEV,TEST')
    expect((await createApplication(h, w.A, { allowed_environments: 'prod' })).allowed_environments).toBe('PROD')
    const all = await createApplication(h, w.A, { allowed_environments: ['prod', 'dev', 'test'] })
    expect(all.allowed_environments).toBe('DEV,PROD,TEST')
    expect(await enrollStatus(all.application_id!, 'test')).toBe(201)
  })

  test('allowed_environments: not in the customer list, malformed, empty or mistyped: 400', async () => {
    for (const allowed of ['QA', 'dev,QA', ['DEV', 'STAGING'], 'bad name', '', [], ',', 42, [1], { DEV: true }, 'x'.repeat(33)]) {
      const res = await h.request('POST', '/api/applications', { body: { organization_id: w.A, description: 'x', allowed_environments: allowed } })
      expectProblem(res, 400)
    }
  })

  test('a supplied unregistered application_id is used (answered lowercase)', async () => {
    const id = crypto.randomUUID()
    const app = await createApplication(h, w.A, { application_id: id.toUpperCase() })
    expect(app.application_id).toBe(id)
    expect((await readAsVendor(h, 'applications', id)).organization_id).toBe(w.A)
  })

  test('a supplied application_id already registered is replaced by a random one', async () => {
    const first = await createApplication(h, w.A, { description: 'first' })
    const again = await createApplication(h, w.A, { application_id: first.application_id, description: 'second' })
    expect(again.application_id).toMatch(UUID_LOWER)
    expect(again.application_id).not.toBe(first.application_id)
    // Registered by another customer: same rule, and the existing one is untouched.
    const other = await createApplication(h, w.B, { application_id: first.application_id, description: 'third' })
    expect(other.application_id).not.toBe(first.application_id)
    expect(other.application_id).not.toBe(again.application_id)
    const kept = await readAsVendor(h, 'applications', first.application_id!)
    expect(kept).toMatchObject({ organization_id: w.A, description: 'first', created: first.created, modified: first.modified })
  })

  test('organization_id sent in uppercase: the customer, answered lowercase', async () => {
    const app = await createApplication(h, w.A.toUpperCase())
    expect(app.organization_id).toBe(w.A)
    const customer = await h.request('POST', '/api/applications', { token: h.token(w.A), body: { organization_id: w.A.toUpperCase(), description: 'x' } })
    expect(customer.status).toBe(201)
    expect(customer.body.application.organization_id).toBe(w.A)
  })

  test('organization_id: a partner or the vendor is 400; unknown is 404; missing or malformed is 400', async () => {
    expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: w.AP, description: 'x' } }), 400)
    expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: w.V, description: 'x' } }), 400)
    expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: crypto.randomUUID(), description: 'x' } }), 404)
    expectProblem(await h.request('POST', '/api/applications', { body: { description: 'x' } }), 400)
    expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: 'acme', description: 'x' } }), 400)
    expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: 7, description: 'x' } }), 400)
    // A customer token naming its own partner: in scope, not a customer.
    expectProblem(await h.request('POST', '/api/applications', { token: h.token(w.A), body: { organization_id: w.AP, description: 'x' } }), 400)
  })

  test('description: missing, empty, blank, mistyped or over 1024 characters is 400; 1024 is fine', async () => {
    for (const description of [undefined, '', '   ', 12, null, 'x'.repeat(1025)]) {
      expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: w.A, description } }), 400)
    }
    expect((await createApplication(h, w.A, { description: 'é'.repeat(1024) })).description).toBe('é'.repeat(1024))
  })

  test('application_id that is not a UUID: 400', async () => {
    expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: w.A, description: 'x', application_id: 'my-app' } }), 400)
  })

  test('body: none, not JSON, not an object: 400; wrong content type 415; over 64 KiB 413; no token 401', async () => {
    expectProblem(await h.request('POST', '/api/applications'), 400)
    expectProblem(await h.request('POST', '/api/applications', { body: '{"organization_id":' }), 400)
    expectProblem(await h.request('POST', '/api/applications', { body: '[]' }), 400)
    const json = JSON.stringify({ organization_id: w.A, description: 'x' })
    expectProblem(await h.request('POST', '/api/applications', { body: json, headers: { 'content-type': 'text/plain' } }), 415)
    expectProblem(await h.request('POST', '/api/applications', { body: { organization_id: w.A, description: 'x', pad: 'x'.repeat(65 * 1024) } }), 413)
    expectProblem(await h.request('POST', '/api/applications', { token: null, body: { organization_id: w.A, description: 'x' } }), 401)
  })

  test('an unknown organization outranks the rest of the body (404 before 400)', async () => {
    const res = await h.request('POST', '/api/applications', { body: { organization_id: crypto.randomUUID(), description: '' } })
    expectProblem(res, 404)
  })
})

// ---------------------------------------------------------------------------------------------
// reads

describe('GET /api/applications and /api/applications/{id}', () => {
  let w: Tenants
  let appsA: string[]
  let appsB: string[]
  beforeAll(async () => {
    w = await world()
    appsA = [(await createApplication(h, w.A)).application_id!, (await createApplication(h, w.A)).application_id!]
    appsB = [(await createApplication(h, w.B)).application_id!]
    appsA.push((await createApplication(h, w.A)).application_id!)
  })

  test('view: exact shape, trace_id, identifiers answered lowercase', async () => {
    const res = await h.request('GET', `/api/applications/${appsA[0]!.toUpperCase()}`)
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['application', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(Object.keys(res.body.application).sort()).toEqual(KEYS_ENABLED)
    expect(res.body.application.application_id).toBe(appsA[0])
    expect(Object.keys((await h.request('GET', `/api/applications/${appsB[0]}`)).body.application).sort()).toEqual(KEYS_PLAIN)
  })

  test('view: malformed id 400, unknown 404, no token 401', async () => {
    expectProblem(await h.request('GET', '/api/applications/not-a-uuid'), 400)
    expectProblem(await h.request('GET', `/api/applications/${crypto.randomUUID()}`), 404, 'not_found')
    expectProblem(await h.request('GET', `/api/applications/${appsA[0]}`, { token: null }), 401)
  })

  test('list: shape, records like the view, creation order', async () => {
    const res = await h.request('GET', '/api/applications', { token: h.token(w.A) })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['applications', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(res.body.applications.map((a: { application_id: string }) => a.application_id)).toEqual(appsA)
    for (const app of res.body.applications) expect(app).toEqual(await readAsVendor(h, 'applications', app.application_id))
  })

  test('list: a customer without applications gets an empty array', async () => {
    const C = await h.createCustomer('C')
    const res = await h.request('GET', '/api/applications', { token: h.token(C, 'viewer') })
    expect(res.status).toBe(200)
    expect(res.body.applications).toEqual([])
  })

  test('list on a fresh service: the vendor sees every application in creation order', async () => {
    const fresh = await createHarness()
    try {
      const A = await fresh.createCustomer('A')
      const B = await fresh.createCustomer('B')
      const ids: string[] = []
      for (const org of [A, B, A]) {
        const res = await fresh.request('POST', '/api/applications', { body: { organization_id: org, description: 'x' } })
        ids.push(res.body.application.application_id)
      }
      const list = await fresh.request('GET', '/api/applications')
      expect(list.body.applications.map((a: { application_id: string }) => a.application_id)).toEqual(ids)
    } finally {
      await fresh.close()
    }
  })
})

// ---------------------------------------------------------------------------------------------
// changes

describe('PATCH /api/applications/{id}', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('updates the description and modified; the rest unchanged', async () => {
    const app = await createApplication(h, w.A, { allowed_environments: 'dev,prod' })
    const res = await h.request('PATCH', `/api/applications/${app.application_id}`, { body: { description: 'Renamed' } })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['application', 'trace_id'])
    expect(Object.keys(res.body.application).sort()).toEqual(KEYS_ENABLED)
    const { api_key: _k, host_url: _h, ...before } = app
    expect({ ...res.body.application, modified: null }).toEqual({ ...before, description: 'Renamed', modified: null })
    expect(res.body.application.modified > app.modified!).toBe(true)
    expect(await readAsVendor(h, 'applications', app.application_id!)).toEqual(res.body.application)
  })

  test('only the description changes, whatever else the body says', async () => {
    const app = await createApplication(h, w.A, { allowed_environments: 'dev' })
    const other = await createApplication(h, w.A)
    const body = { description: 'New', application_id: other.application_id, organization_id: w.B, allowed_environments: 'PROD', state: 'suspended', created: other.created }
    const res = await h.request('PATCH', `/api/applications/${app.application_id}`, { body })
    expect(res.status).toBe(200)
    const { api_key: _k, host_url: _h, ...before } = app
    expect({ ...res.body.application, modified: null }).toEqual({ ...before, description: 'New', modified: null })
    expect((await readAsVendor(h, 'applications', other.application_id!)).description).toBe('App')
  })

  test('bad bodies: 400 and nothing changes; unknown 404; malformed id 400; no token 401; 415; 413', async () => {
    const app = await createApplication(h, w.B)
    const { api_key: _k, host_url: _h, ...before } = app
    const path = `/api/applications/${app.application_id}`
    expectProblem(await h.request('PATCH', path, { body: '{"description":"x"}', headers: { 'content-type': 'text/plain' } }), 415)
    expectProblem(await h.request('PATCH', path, { body: { description: 'x'.repeat(65 * 1024) } }), 413)
    for (const body of [undefined, {}, { description: '' }, { description: 5 }, { description: 'x'.repeat(1025) }, '{bad']) {
      expectProblem(await h.request('PATCH', `/api/applications/${app.application_id}`, { body }), 400)
    }
    expect(await readAsVendor(h, 'applications', app.application_id!)).toEqual(before)
    expectProblem(await h.request('PATCH', `/api/applications/${crypto.randomUUID()}`, { body: { description: 'x' } }), 404)
    expectProblem(await h.request('PATCH', '/api/applications/123', { body: { description: 'x' } }), 400)
    expectProblem(await h.request('PATCH', `/api/applications/${app.application_id}`, { token: null, body: { description: 'x' } }), 401)
  })
})

describe('PATCH /api/applications/{id}/suspend and /activate', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('active → suspended → active, modified increasing; a no-op is 409', async () => {
    const app = await createApplication(h, w.A)
    expectProblem(await h.request('PATCH', `/api/applications/${app.application_id}/activate`), 409, 'already_in_state')
    const suspended = await h.request('PATCH', `/api/applications/${app.application_id}/suspend`)
    expect(suspended.status).toBe(200)
    expect(Object.keys(suspended.body).sort()).toEqual(['application', 'trace_id'])
    expect(Object.keys(suspended.body.application).sort()).toEqual(KEYS_ENABLED)
    expect(suspended.body.application.state).toBe('suspended')
    expect(suspended.body.application.modified > app.modified!).toBe(true)
    expectProblem(await h.request('PATCH', `/api/applications/${app.application_id}/suspend`), 409, 'already_in_state')
    expect((await readAsVendor(h, 'applications', app.application_id!)).modified).toBe(suspended.body.application.modified)
    const activated = await h.request('PATCH', `/api/applications/${app.application_id}/activate`)
    expect(activated.status).toBe(200)
    expect(activated.body.application.state).toBe('active')
    expect(activated.body.application.modified > suspended.body.application.modified).toBe(true)
    expect(await readAsVendor(h, 'applications', app.application_id!)).toEqual(activated.body.application)
  })

  test('unknown 404, malformed 400, no token 401, a body-less action with an unknown action segment 404', async () => {
    expectProblem(await h.request('PATCH', `/api/applications/${crypto.randomUUID()}/suspend`), 404)
    expectProblem(await h.request('PATCH', '/api/applications/xyz/activate'), 400)
    const app = await createApplication(h, w.A)
    expectProblem(await h.request('PATCH', `/api/applications/${app.application_id}/suspend`, { token: null }), 401)
    expectProblem(await h.request('PATCH', `/api/applications/${app.application_id}/retire`), 404)
    expect((await readAsVendor(h, 'applications', app.application_id!)).state).toBe('active')
  })
})

// ---------------------------------------------------------------------------------------------
// related effects

describe('applications per customer (docs/security.md)', () => {
  test(`at most ${MAX_APPLICATIONS_PER_CUSTOMER}: one more is 409 too_many_applications and creates nothing`, async () => {
    const customer = await h.createCustomer('Many applications')
    // All but one made directly, as the service makes them (a thousand requests would only be slower).
    await h.storage.transaction(async (tx) => {
      for (let i = 1; i < MAX_APPLICATIONS_PER_CUSTOMER; i++) {
        await tx.insert('applications', { application_id: crypto.randomUUID(), organization_id: customer, description: `A${i}`, environments: ['PRODUCTION'], state: 'active', api_key_hash: '00'.repeat(32) })
      }
    })
    const create = () => h.request('POST', '/api/applications', { body: { organization_id: customer, description: 'One more' } })
    expect((await create()).status).toBe(201)
    expectProblem(await create(), 409, 'too_many_applications')
    const listed = await h.request('GET', '/api/applications', { token: h.token(customer, 'viewer') })
    expect(listed.body.applications).toHaveLength(MAX_APPLICATIONS_PER_CUSTOMER)
  })

  test('concurrent creates near the bound never pass it (database mode counted them unlocked: 1,002)', async () => {
    const customer = await h.createCustomer('Racing applications')
    await h.storage.transaction(async (tx) => {
      for (let i = 1; i < MAX_APPLICATIONS_PER_CUSTOMER; i++) {
        await tx.insert('applications', { application_id: crypto.randomUUID(), organization_id: customer, description: `A${i}`, environments: ['PRODUCTION'], state: 'active', api_key_hash: '00'.repeat(32) })
      }
    })
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => h.request('POST', '/api/applications', { body: { organization_id: customer, description: `Racer ${i}` } })))
    expect(answers.map((res) => res.status).sort()).toEqual([201, ...Array(11).fill(409)])
    for (const res of answers) if (res.status === 409) expectProblem(res, 409, 'too_many_applications')
    const listed = await h.request('GET', '/api/applications', { token: h.token(customer, 'viewer') })
    expect(listed.body.applications).toHaveLength(MAX_APPLICATIONS_PER_CUSTOMER)
  })
})
