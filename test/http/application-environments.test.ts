/**
 * Application environments over HTTP (/api/environments/{application_id}): view, add, remove;
 * customers not enabled (404), the rules of docs/api.md "Application environments" (never fewer
 * than one; not once keysets exist) and docs/api.md "Endpoints". Who may do each (every role and
 * scope of docs/api.md "Authentication, roles and scope"): authorization-matrix.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'
import { createApplicationId, enrollmentBody, readAsVendor, tenants, p256PublicKey, expectProblem } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// helpers

/** A and B enabled for DEV, PROD, TEST (default PROD), with partners; N not enabled. */
async function world() {
  const envs = { default: 'PROD', supported: 'dev,prod,test' }
  return { ...(await tenants(h, { A: envs, B: envs })), N: await h.createCustomer('N') }
}
type World = Awaited<ReturnType<typeof world>>

const path = (id: string) => `/api/environments/${id}`

async function environmentsOf(id: string): Promise<string> {
  const res = await h.request('GET', path(id))
  expect(res.status).toBe(200)
  return res.body.environments
}

async function enroll(applicationId: string, environment: string): Promise<{ status: number; enrollmentId: string }> {
  const enrollmentId = crypto.randomUUID()
  const res = await h.request('POST', '/api/enrollments', { body: enrollmentBody(applicationId, environment, { enrollment_id: enrollmentId }) })
  return { status: res.status, enrollmentId }
}

// ---------------------------------------------------------------------------------------------

describe('GET /api/environments/{application_id}', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('exact shape; the same list as allowed_environments; id answered lowercase', async () => {
    const id = await createApplicationId(h, w.A, 'test,dev')
    const res = await h.request('GET', path(id.toUpperCase()))
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['application_id', 'environments', 'trace_id'])
    expect(res.body).toMatchObject({ application_id: id, environments: 'DEV,TEST' })
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect((await readAsVendor(h, 'applications', id)).allowed_environments).toBe(res.body.environments)
  })

  test('a new application without allowed_environments has the customer default', async () => {
    expect(await environmentsOf(await createApplicationId(h, w.A))).toBe('PROD')
  })

  test('unknown 404, malformed id 400, no token 401', async () => {
    expectProblem(await h.request('GET', path(crypto.randomUUID())), 404)
    expectProblem(await h.request('GET', path('app-1')), 400)
    expectProblem(await h.request('GET', path(await createApplicationId(h, w.A)), { token: null }), 401)
  })
})

describe('a customer not enabled for virtual environments', () => {
  test('its applications have no environment endpoints: 404 for every method and every role', async () => {
    const w = await world()
    const id = await createApplicationId(h, w.N)
    const before = await readAsVendor(h, 'applications', id)
    for (const token of [h.vendorToken, h.token(w.N), h.token(w.N, 'application_admin'), h.token(w.N, 'viewer')]) {
      expectProblem(await h.request('GET', path(id), { token }), 404)
      expectProblem(await h.request('POST', path(id), { token, body: { environment: 'PRODUCTION' } }), 404)
      expectProblem(await h.request('POST', path(id), { token, body: { environment: 'DEV' } }), 404)
      expectProblem(await h.request('DELETE', path(id), { token, body: { environment: 'PRODUCTION' } }), 404)
    }
    expect(await readAsVendor(h, 'applications', id)).toEqual(before)
  })
})

describe('POST /api/environments/{application_id}', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('adds (any case): 200 with the sorted list and a message; allowed_environments and modified follow', async () => {
    const id = await createApplicationId(h, w.A, 'prod')
    const before = await readAsVendor(h, 'applications', id)
    const res = await h.request('POST', path(id), { body: { environment: 'dev' } })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['application_id', 'environments', 'message', 'trace_id'])
    expect(res.body).toMatchObject({ application_id: id, environments: 'DEV,PROD' })
    expect(typeof res.body.message).toBe('string')
    expect(res.body.message.length).toBeGreaterThan(0)
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const after = await readAsVendor(h, 'applications', id)
    expect(after.allowed_environments).toBe('DEV,PROD')
    expect(after.modified! > before.modified!).toBe(true)
    expect(await environmentsOf(id)).toBe('DEV,PROD')
    expect((await enroll(id, 'DEV')).status).toBe(201)
    expect((await h.request('POST', path(id), { body: { environment: 'Test' } })).body.environments).toBe('DEV,PROD,TEST')
  })

  test('already there: 409; not in the customer list or not a name: 400; 415; 413; nothing changes', async () => {
    const id = await createApplicationId(h, w.A, 'dev,prod')
    const before = await readAsVendor(h, 'applications', id)
    expectProblem(await h.request('POST', path(id), { body: { environment: 'DEV' } }), 409)
    expectProblem(await h.request('POST', path(id), { body: { environment: 'prod' } }), 409)
    expectProblem(await h.request('POST', path(id), { body: { environment: 'QA' } }), 400)
    expectProblem(await h.request('POST', path(id), { body: { environment: 'PRODUCTION' } }), 400)
    for (const body of [undefined, {}, { environment: '' }, { environment: 'bad name' }, { environment: 'x'.repeat(33) }, { environment: ['TEST'] }, { environment: 3 }, 'nope']) {
      expectProblem(await h.request('POST', path(id), { body }), 400)
    }
    expectProblem(await h.request('POST', path(id), { body: JSON.stringify({ environment: 'TEST' }), headers: { 'content-type': 'text/plain' } }), 415)
    expectProblem(await h.request('POST', path(id), { body: { environment: 'TEST', pad: 'x'.repeat(65 * 1024) } }), 413)
    expect(await readAsVendor(h, 'applications', id)).toEqual(before)
  })

  test('unknown 404, malformed id 400, no token 401', async () => {
    expectProblem(await h.request('POST', path(crypto.randomUUID()), { body: { environment: 'DEV' } }), 404)
    expectProblem(await h.request('POST', path('nope'), { body: { environment: 'DEV' } }), 400)
    expectProblem(await h.request('POST', path(await createApplicationId(h, w.A)), { token: null, body: { environment: 'DEV' } }), 401)
  })
})

describe('DELETE /api/environments/{application_id}', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('removes (any case): 200 without a message; allowed_environments and modified follow', async () => {
    const id = await createApplicationId(h, w.A, 'dev,prod,test')
    const before = await readAsVendor(h, 'applications', id)
    const res = await h.request('DELETE', path(id), { body: { environment: 'test' } })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['application_id', 'environments', 'trace_id'])
    expect(res.body).toMatchObject({ application_id: id, environments: 'DEV,PROD' })
    const after = await readAsVendor(h, 'applications', id)
    expect(after.allowed_environments).toBe('DEV,PROD')
    expect(after.modified! > before.modified!).toBe(true)
    // Enrolling in it is now an unknown environment for the application.
    expect((await enroll(id, 'TEST')).status).toBe(400)
  })

  test('never fewer than one: removing the last is 409', async () => {
    const id = await createApplicationId(h, w.A, 'dev,prod')
    expect((await h.request('DELETE', path(id), { body: { environment: 'DEV' } })).status).toBe(200)
    const before = await readAsVendor(h, 'applications', id)
    expectProblem(await h.request('DELETE', path(id), { body: { environment: 'PROD' } }), 409)
    expect(await readAsVendor(h, 'applications', id)).toEqual(before)
    expect(await environmentsOf(id)).toBe('PROD')
  })

  test('not in the list: 404 (whether supported by the customer or not); a bad name or body 400; 415; 413', async () => {
    const id = await createApplicationId(h, w.A, 'dev,prod')
    const before = await readAsVendor(h, 'applications', id)
    expectProblem(await h.request('DELETE', path(id), { body: { environment: 'TEST' } }), 404)
    expectProblem(await h.request('DELETE', path(id), { body: { environment: 'QA' } }), 404)
    for (const body of [undefined, {}, { environment: 'no way' }, { environment: null }]) {
      expectProblem(await h.request('DELETE', path(id), { body }), 400)
    }
    expectProblem(await h.request('DELETE', path(id), { body: '{"environment":"DEV"}', headers: { 'content-type': 'text/plain' } }), 415)
    expectProblem(await h.request('DELETE', path(id), { body: { environment: 'DEV', pad: 'x'.repeat(65 * 1024) } }), 413)
    expect(await readAsVendor(h, 'applications', id)).toEqual(before)
  })

  test('an environment with keysets cannot be removed (409), even once the enrollment is suspended', async () => {
    const id = await createApplicationId(h, w.A, 'dev,prod,test')
    const { status, enrollmentId } = await enroll(id, 'DEV')
    expect(status).toBe(201)
    const keyset = await h.request('POST', `/api/enrollments/${enrollmentId}/keysets`, { body: { client_enclave_key: p256PublicKey() } })
    expect(keyset.status).toBe(201)
    const before = await readAsVendor(h, 'applications', id)
    expectProblem(await h.request('DELETE', path(id), { body: { environment: 'dev' } }), 409)
    expect((await h.request('PATCH', `/api/enrollments/${enrollmentId}/suspend`)).status).toBe(200)
    expectProblem(await h.request('DELETE', path(id), { body: { environment: 'DEV' } }), 409)
    expect(await readAsVendor(h, 'applications', id)).toEqual(before)
    // Other environments of it, and DEV of another application, are not held.
    expect((await h.request('DELETE', path(id), { body: { environment: 'TEST' } })).status).toBe(200)
    const other = await createApplicationId(h, w.A, 'dev,prod')
    expect((await h.request('DELETE', path(other), { body: { environment: 'DEV' } })).status).toBe(200)
  })

  test('an enrollment without keysets does not hold its environment', async () => {
    const id = await createApplicationId(h, w.A, 'dev,prod')
    expect((await enroll(id, 'DEV')).status).toBe(201)
    expect((await h.request('DELETE', path(id), { body: { environment: 'DEV' } })).status).toBe(200)
  })

  test('unknown 404, malformed id 400, no token 401', async () => {
    expectProblem(await h.request('DELETE', path(crypto.randomUUID()), { body: { environment: 'DEV' } }), 404)
    expectProblem(await h.request('DELETE', path('zzz'), { body: { environment: 'DEV' } }), 400)
    expectProblem(await h.request('DELETE', path(await createApplicationId(h, w.A, 'dev,prod')), { token: null, body: { environment: 'DEV' } }), 401)
  })
})
