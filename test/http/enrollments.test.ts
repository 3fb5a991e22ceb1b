/**
 * Enrollments over HTTP: create (docs/api.md "Endpoints"), view, suspend, activate, list shape, and
 * the 400/401/404/409 rules of docs/api.md "Status codes and errors" table and the contract.
 * Keysets: keysets.test.ts; filters and paging: lists.test.ts; who may do each (every role and
 * scope of docs/api.md "Authentication, roles and scope"): authorization-matrix.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'
import { createApplicationId, enrollmentBody, readAsVendor, tenants, TIMESTAMP, type EnrollmentBody, ENROLLMENT_KEYS, expectProblem } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// helpers

/** A enabled for DEV, PROD, TEST with applications appA (DEV, PROD) and appA2; B not enabled, with appB. */
async function world() {
  const w = await tenants(h, { A: { default: 'PROD', supported: 'DEV,PROD,TEST' } })
  return { ...w, appA: await createApplicationId(h, w.A, 'dev,prod'), appA2: await createApplicationId(h, w.A, 'prod'), appB: await createApplicationId(h, w.B) }
}
type World = Awaited<ReturnType<typeof world>>

const post = (b: unknown, token?: string) => h.request('POST', '/api/enrollments', { token, body: b })

async function enroll(b: EnrollmentBody, token?: string) {
  const res = await post(b, token)
  expect(res.status).toBe(201)
  return res.body.enrollment as Record<string, string | null>
}

async function status(path: string, token?: string) {
  return (await h.request('GET', path, { token })).status
}

async function setAppState(appId: string, action: 'suspend' | 'activate') {
  expect((await h.request('PATCH', `/api/applications/${appId}/${action}`)).status).toBe(200)
}

// ---------------------------------------------------------------------------------------------

describe('POST /api/enrollments', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('201: exact fields, nulls, generated nickname, uppercased environment, lowercase ids', async () => {
    const b = enrollmentBody(w.appA, 'dev')
    const res = await post({ ...b, enrollment_id: b.enrollment_id.toUpperCase(), consumer_id: b.consumer_id.toUpperCase() }, h.token(w.A))
    expect(res.status).toBe(201)
    expect(Object.keys(res.body).sort()).toEqual(['enrollment', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const e = res.body.enrollment
    expect(Object.keys(e).sort()).toEqual(ENROLLMENT_KEYS)
    expect(e).toEqual({
      enrollment_id: b.enrollment_id,
      installation_id: b.installation_id,
      consumer_id: b.consumer_id,
      application_id: w.appA,
      environment: 'DEV',
      nickname: `${b.installation_id}:${b.consumer_id}:${w.appA}:DEV`,
      active_keyset_id: null,
      client_enclave_key: null,
      client_storage_key_shares: null,
      state: 'active',
      created: e.created,
      modified: e.created,
    })
    expect(e.created).toMatch(TIMESTAMP)
    expect(await readAsVendor(h, 'enrollments', b.enrollment_id)).toEqual(e)
  })

  test('a sent nickname is ignored', async () => {
    const b = enrollmentBody(w.appA, 'PROD')
    const e = await enroll({ ...b, nickname: 'my phone' } as EnrollmentBody)
    expect(e.nickname).toBe(`${b.installation_id}:${b.consumer_id}:${w.appA}:PROD`)
  })

  test("a missing consumer and installation are created in the application's customer", async () => {
    for (const token of [h.vendorToken, h.token(w.A), h.token(w.AP, 'application_admin')]) {
      const b = enrollmentBody(w.appA, 'PROD', { installation_description: 'Galaxy S24' })
      const e = await enroll(b, token)
      const consumer = await h.request('GET', `/api/consumers/${b.consumer_id}`, { token: h.token(w.A, 'viewer') })
      expect(consumer.status).toBe(200)
      expect(consumer.body.consumer).toMatchObject({ consumer_id: b.consumer_id, state: 'active' })
      const installation = await h.request('GET', `/api/installations/${b.installation_id}`, { token: h.token(w.AP, 'viewer') })
      expect(installation.status).toBe(200)
      expect(installation.body.installation).toMatchObject({ installation_id: b.installation_id, description: 'Galaxy S24', state: 'unregistered' })
      // One change, one time: the records an enrollment creates share its `created`.
      expect(installation.body.installation.created).toBe(consumer.body.consumer.created)
      expect(e.created).toBe(installation.body.installation.created)
      expect(await status(`/api/consumers/${b.consumer_id}`, h.token(w.B))).toBe(404)
      expect(await status(`/api/installations/${b.installation_id}`, h.token(w.B))).toBe(404)
    }
    // The vendor enrolling in B's application: B's consumer and installation.
    const b = enrollmentBody(w.appB, 'production')
    expect((await enroll(b)).environment).toBe('PRODUCTION')
    expect(await status(`/api/consumers/${b.consumer_id}`, h.token(w.B))).toBe(200)
    expect(await status(`/api/installations/${b.installation_id}`, h.token(w.BP))).toBe(200)
    expect(await status(`/api/consumers/${b.consumer_id}`, h.token(w.A))).toBe(404)
  })

  test('an existing consumer and installation are used as they are', async () => {
    const consumer = await h.request('POST', '/api/consumers', { token: h.token(w.A), body: { consumer_id: crypto.randomUUID() } })
    const installation = await h.request('POST', '/api/installations', { token: h.token(w.A), body: { installation_id: crypto.randomUUID(), description: 'original' } })
    const verified = await h.request('PATCH', `/api/installations/${installation.body.installation.installation_id}/verify`)
    const b = enrollmentBody(w.appA, 'DEV', { consumer_id: consumer.body.consumer.consumer_id, installation_id: installation.body.installation.installation_id, installation_description: 'other' })
    await enroll(b, h.token(w.A))
    expect((await h.request('GET', `/api/consumers/${b.consumer_id}`)).body.consumer).toEqual(consumer.body.consumer)
    expect((await h.request('GET', `/api/installations/${b.installation_id}`)).body.installation).toEqual(verified.body.installation)
    // One consumer and installation in several enrollments.
    await enroll({ ...b, enrollment_id: crypto.randomUUID(), environment: 'PROD' })
    await enroll({ ...b, enrollment_id: crypto.randomUUID(), application_id: w.appA2, environment: 'PROD' })
  })

  test('the same enrollment_id with the same four identifiers: 200 and the existing record unchanged', async () => {
    const b = enrollmentBody(w.appA, 'DEV')
    const first = await enroll(b)
    const suspended = await h.request('PATCH', `/api/enrollments/${b.enrollment_id}/suspend`)
    expect(suspended.status).toBe(200)
    for (const again of [b, { ...b, environment: 'dev', installation_description: 'another', nickname: 'x' }, { ...b, consumer_id: b.consumer_id.toUpperCase() }]) {
      const res = await post(again, h.token(w.AP))
      expect(res.status).toBe(200)
      expect(res.body.enrollment).toEqual(suspended.body.enrollment)
    }
    expect(await readAsVendor(h, 'enrollments', b.enrollment_id)).toEqual({ ...first, state: 'suspended', modified: suspended.body.enrollment.modified })
  })

  test('the same enrollment_id with any identifier different: 400, nothing created', async () => {
    const b = enrollmentBody(w.appA, 'DEV')
    const first = await enroll(b)
    const twin = await createApplicationId(h, w.A, 'dev,prod')
    const variants: Partial<EnrollmentBody>[] = [
      { consumer_id: crypto.randomUUID() },
      { installation_id: crypto.randomUUID() },
      { application_id: twin },
      { environment: 'PROD' },
      { application_id: w.appA2, environment: 'PROD' },
    ]
    for (const variant of variants) {
      const res = await post({ ...b, ...variant })
      expectProblem(res, 400)
      if (variant.consumer_id) expect(await status(`/api/consumers/${variant.consumer_id}`)).toBe(404)
      if (variant.installation_id) expect(await status(`/api/installations/${variant.installation_id}`)).toBe(404)
    }
    expect(await readAsVendor(h, 'enrollments', b.enrollment_id)).toEqual(first)
  })

  test('the same four identifiers under another enrollment_id: 409', async () => {
    const b = enrollmentBody(w.appA, 'PROD')
    await enroll(b)
    const other = { ...b, enrollment_id: crypto.randomUUID() }
    expectProblem(await post(other), 409)
    expectProblem(await post({ ...other, environment: 'prod' }, h.token(w.A)), 409)
    expect(await status(`/api/enrollments/${other.enrollment_id}`)).toBe(404)
    // Any one of them different is another enrollment.
    await enroll({ ...other, environment: 'DEV' })
  })

  test('a suspended consumer or installation: 409, and nothing else is created', async () => {
    const consumerId = crypto.randomUUID()
    const installationId = crypto.randomUUID()
    expect((await h.request('POST', '/api/consumers', { body: { consumer_id: consumerId, organization_id: w.A } })).status).toBe(201)
    expect((await h.request('POST', '/api/installations', { body: { installation_id: installationId, description: 'x', organization_id: w.A } })).status).toBe(201)
    expect((await h.request('PATCH', `/api/consumers/${consumerId}/suspend`)).status).toBe(200)
    expect((await h.request('PATCH', `/api/installations/${installationId}/suspend`)).status).toBe(200)

    const withConsumer = enrollmentBody(w.appA, 'DEV', { consumer_id: consumerId })
    const refusedConsumer = await post(withConsumer)
    expectProblem(refusedConsumer, 409)
    expect(refusedConsumer.body.code).toBe('consumer_suspended')
    expect(await status(`/api/installations/${withConsumer.installation_id}`)).toBe(404)
    expect(await status(`/api/enrollments/${withConsumer.enrollment_id}`)).toBe(404)

    const withInstallation = enrollmentBody(w.appA, 'DEV', { installation_id: installationId })
    const refusedInstallation = await post(withInstallation, h.token(w.AP))
    expectProblem(refusedInstallation, 409)
    expect(refusedInstallation.body.code).toBe('installation_suspended')
    expect(await status(`/api/consumers/${withInstallation.consumer_id}`)).toBe(404)
    expect(await status(`/api/enrollments/${withInstallation.enrollment_id}`)).toBe(404)

    // Both suspended: the consumer is judged first (the two are created together in database mode).
    const withBoth = await post(enrollmentBody(w.appA, 'DEV', { consumer_id: consumerId, installation_id: installationId }))
    expectProblem(withBoth, 409)
    expect(withBoth.body.code).toBe('consumer_suspended')

    // Active again: enrollable.
    expect((await h.request('PATCH', `/api/consumers/${consumerId}/activate`)).status).toBe(200)
    expect((await h.request('PATCH', `/api/installations/${installationId}/verify`)).status).toBe(200)
    await enroll(enrollmentBody(w.appA, 'DEV', { consumer_id: consumerId, installation_id: installationId }))
  })

  test("a consumer or installation of another customer: 409, theirs unchanged", async () => {
    const ofB = enrollmentBody(w.appB, 'PRODUCTION')
    await enroll(ofB)
    const consumerBefore = (await h.request('GET', `/api/consumers/${ofB.consumer_id}`)).body.consumer
    const installationBefore = (await h.request('GET', `/api/installations/${ofB.installation_id}`)).body.installation
    const withConsumer = enrollmentBody(w.appA, 'DEV', { consumer_id: ofB.consumer_id })
    expectProblem(await post(withConsumer, h.token(w.A)), 409)
    const withInstallation = enrollmentBody(w.appA, 'DEV', { installation_id: ofB.installation_id })
    expectProblem(await post(withInstallation), 409)
    expect(await status(`/api/installations/${withConsumer.installation_id}`)).toBe(404)
    expect(await status(`/api/consumers/${withInstallation.consumer_id}`)).toBe(404)
    expect((await h.request('GET', `/api/consumers/${ofB.consumer_id}`)).body.consumer).toEqual(consumerBefore)
    expect((await h.request('GET', `/api/installations/${ofB.installation_id}`)).body.installation).toEqual(installationBefore)
  })

  test('an unknown or out-of-scope application: 404, nothing created', async () => {
    const unknown = enrollmentBody(crypto.randomUUID(), 'PROD')
    expectProblem(await post(unknown), 404)
    for (const token of [h.token(w.A), h.token(w.AP), h.token(w.A, 'viewer')]) {
      const other = enrollmentBody(w.appB, 'PRODUCTION')
      expectProblem(await post(other, token), 404)
      expect(await status(`/api/consumers/${other.consumer_id}`)).toBe(404)
      expect(await status(`/api/installations/${other.installation_id}`)).toBe(404)
    }
    expect(await status(`/api/consumers/${unknown.consumer_id}`)).toBe(404)
    // The application is judged before the rest of the body.
    expectProblem(await post({ application_id: crypto.randomUUID() }), 404)
    expectProblem(await post({ ...enrollmentBody(w.appB, ''), enrollment_id: 'x' }, h.token(w.A)), 404)
  })

  test('a suspended application: 401 (for every role in scope); active again: enrollable', async () => {
    const app = await createApplicationId(h, w.A, 'dev')
    const existing = enrollmentBody(app, 'DEV')
    await enroll(existing)
    await setAppState(app, 'suspend')
    // The application is judged before the id: the same body again is 401 too, not the existing enrollment's 200.
    expectProblem(await post(existing), 401)
    const b = enrollmentBody(app, 'DEV')
    for (const token of [h.vendorToken, h.token(w.A), h.token(w.AP), h.token(w.A, 'viewer')]) {
      const res = await post(b, token)
      expectProblem(res, 401)
    }
    expectProblem(await post({ application_id: app }), 401)
    expect(await status(`/api/consumers/${b.consumer_id}`)).toBe(404)
    expect(await status(`/api/installations/${b.installation_id}`)).toBe(404)
    // Out of scope stays 404, suspended or not.
    expectProblem(await post(b, h.token(w.B)), 404)
    await setAppState(app, 'activate')
    await enroll(b)
  })

  test('an environment the application does not have: 400', async () => {
    for (const environment of ['TEST', 'test', 'PRODUCTION', 'QA']) {
      const b = enrollmentBody(w.appA, environment)
      expectProblem(await post(b), 400)
      expect(await status(`/api/consumers/${b.consumer_id}`)).toBe(404)
    }
    expectProblem(await post(enrollmentBody(w.appB, 'PROD')), 400)
  })

  test('bad bodies: 400; wrong content type 415; over 64 KiB 413; no token 401', async () => {
    const good = enrollmentBody(w.appA, 'DEV')
    const fields = Object.keys(good) as (keyof EnrollmentBody)[]
    for (const field of fields) {
      const { [field]: _, ...missing } = good
      expectProblem(await post(missing), 400)
      expectProblem(await post({ ...good, [field]: 42 }), 400)
    }
    for (const field of ['enrollment_id', 'consumer_id', 'installation_id'] as const) expectProblem(await post({ ...good, [field]: 'id-1' }), 400)
    for (const environment of ['', 'no spaces', 'x'.repeat(33)]) expectProblem(await post({ ...good, environment }), 400)
    for (const installation_description of ['', '  ', 'x'.repeat(1025)]) expectProblem(await post({ ...good, installation_description }), 400)
    expectProblem(await post(undefined), 400)
    expectProblem(await post('{"enrollment_id"'), 400)
    expectProblem(await h.request('POST', '/api/enrollments', { body: JSON.stringify(good), headers: { 'content-type': 'text/plain' } }), 415)
    expectProblem(await post({ ...good, installation_description: 'x'.repeat(65 * 1024) }), 413)
    expectProblem(await h.request('POST', '/api/enrollments', { token: null, body: good }), 401)
    expect(await status(`/api/enrollments/${good.enrollment_id}`)).toBe(404)
    expect(await status(`/api/consumers/${good.consumer_id}`)).toBe(404)
  })
})

describe('GET /api/enrollments/{id}', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('exact shape; id answered lowercase; malformed 400; unknown 404; no token 401', async () => {
    const e = await enroll(enrollmentBody(w.appA, 'DEV'))
    const res = await h.request('GET', `/api/enrollments/${e.enrollment_id!.toUpperCase()}`)
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['enrollment', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(res.body.enrollment).toEqual(e)
    expectProblem(await h.request('GET', '/api/enrollments/e-1'), 400)
    expectProblem(await h.request('GET', `/api/enrollments/${crypto.randomUUID()}`), 404)
    expectProblem(await h.request('GET', `/api/enrollments/${e.enrollment_id}`, { token: null }), 401)
  })

  test('of a suspended application: 401 in scope, 404 out of it', async () => {
    const app = await createApplicationId(h, w.A, 'prod')
    const e = await enroll(enrollmentBody(app, 'PROD'))
    await setAppState(app, 'suspend')
    for (const token of [h.vendorToken, h.token(w.A, 'viewer'), h.token(w.AP)]) {
      expectProblem(await h.request('GET', `/api/enrollments/${e.enrollment_id}`, { token }), 401)
    }
    expectProblem(await h.request('GET', `/api/enrollments/${e.enrollment_id}`, { token: h.token(w.B) }), 404)
    await setAppState(app, 'activate')
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(e)
  })
})

describe('PATCH /api/enrollments/{id}/suspend and /activate', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('active → suspended → active with modified increasing; no-ops 409', async () => {
    const e = await enroll(enrollmentBody(w.appA, 'DEV'))
    expectProblem(await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/activate`), 409, 'already_in_state')
    const suspended = await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/suspend`)
    expect(suspended.status).toBe(200)
    expect(Object.keys(suspended.body).sort()).toEqual(['enrollment', 'trace_id'])
    expect(Object.keys(suspended.body.enrollment).sort()).toEqual(ENROLLMENT_KEYS)
    expect({ ...suspended.body.enrollment, modified: null }).toEqual({ ...e, state: 'suspended', modified: null })
    expect(suspended.body.enrollment.modified > e.modified!).toBe(true)
    expectProblem(await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/suspend`), 409, 'already_in_state')
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(suspended.body.enrollment)
    const active = await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/activate`)
    expect(active.status).toBe(200)
    expect(active.body.enrollment.state).toBe('active')
    expect(active.body.enrollment.modified > suspended.body.enrollment.modified).toBe(true)
  })

  test('of a suspended application: 401, nothing changes', async () => {
    const app = await createApplicationId(h, w.A, 'prod')
    const e = await enroll(enrollmentBody(app, 'PROD'))
    await setAppState(app, 'suspend')
    for (const token of [h.vendorToken, h.token(w.A), h.token(w.AP), h.token(w.A, 'viewer')]) {
      expectProblem(await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/suspend`, { token }), 401)
    }
    expectProblem(await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/suspend`, { token: h.token(w.B) }), 404)
    await setAppState(app, 'activate')
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(e)
  })

  test('malformed 400; unknown 404; no token 401', async () => {
    expectProblem(await h.request('PATCH', '/api/enrollments/zz/suspend'), 400)
    expectProblem(await h.request('PATCH', `/api/enrollments/${crypto.randomUUID()}/activate`), 404)
    const e = await enroll(enrollmentBody(w.appA, 'DEV'))
    expectProblem(await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/suspend`, { token: null }), 401)
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(e)
  })
})

describe('GET /api/enrollments: shape', () => {
  let w: World
  let ofA: Record<string, string | null>[]
  beforeAll(async () => {
    w = await world()
    ofA = [await enroll(enrollmentBody(w.appA, 'DEV')), await enroll(enrollmentBody(w.appA2, 'PROD'))]
    await enroll(enrollmentBody(w.appB, 'PRODUCTION'))
  })

  test('enrollments, total, page_size; page only when sent; no trace_id', async () => {
    const res = await h.request('GET', '/api/enrollments', { token: h.token(w.A) })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ enrollments: ofA, total: ofA.length, page_size: 100 })
    const paged = await h.request('GET', '/api/enrollments?page=2&page_size=1', { token: h.token(w.AP, 'viewer') })
    expect(paged.body).toEqual({ enrollments: [ofA[1]], total: ofA.length, page: 2, page_size: 1 })
  })

  test('a customer without enrollments: empty; no token 401', async () => {
    const C = await h.createCustomer('C')
    expect((await h.request('GET', '/api/enrollments', { token: h.token(C) })).body).toEqual({ enrollments: [], total: 0, page_size: 100 })
    expectProblem(await h.request('GET', '/api/enrollments', { token: null }), 401)
  })
})
