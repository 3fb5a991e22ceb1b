/**
 * Installations over HTTP: create (201, or 200 for an existing one), view, update, suspend,
 * verify, list shapes; ownership (409), the state machine of docs/api.md "Endpoints" and the
 * automatic-verification switch. Filters: lists.test.ts; who may do each (every role and scope of
 * docs/api.md "Authentication, roles and scope"): authorization-matrix.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'
import { createInstallation, readAsVendor, tenants, TIMESTAMP, type Tenants, expectProblem } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// helpers

const KEYS = ['created', 'description', 'installation_id', 'modified', 'state']

const world = (harness: Harness = h) => tenants(harness, { B: { default: 'PROD', supported: 'DEV,PROD' } })

const act = (id: string, action: 'suspend' | 'verify', token?: string) => h.request('PATCH', `/api/installations/${id}/${action}`, { token })

// ---------------------------------------------------------------------------------------------

describe('POST /api/installations', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('201 with exactly the installation fields; unregistered; id answered lowercase', async () => {
    const id = crypto.randomUUID()
    const res = await h.request('POST', '/api/installations', { token: h.token(w.A), body: { installation_id: id.toUpperCase(), description: 'Firefox on a laptop' } })
    expect(res.status).toBe(201)
    expect(Object.keys(res.body).sort()).toEqual(['installation', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(Object.keys(res.body.installation).sort()).toEqual(KEYS)
    expect(res.body.installation).toMatchObject({ installation_id: id, description: 'Firefox on a laptop', state: 'unregistered' })
    expect(res.body.installation.created).toMatch(TIMESTAMP)
    expect(res.body.installation.modified).toBe(res.body.installation.created)
    expect(await readAsVendor(h, 'installations', id)).toEqual(res.body.installation)
  })

  test('an existing installation of the same customer: 200, unchanged (even with another description)', async () => {
    const i = await createInstallation(h, w.A, 'first')
    const verified = await act(i.installation_id!, 'verify')
    expect(verified.status).toBe(200)
    for (const token of [h.token(w.A), h.token(w.AP)]) {
      const again = await h.request('POST', '/api/installations', { token, body: { installation_id: i.installation_id, description: 'second' } })
      expect(again.status).toBe(200)
      expect(again.body.installation).toEqual(verified.body.installation)
    }
    expect(await readAsVendor(h, 'installations', i.installation_id!)).toEqual(verified.body.installation)
  })

  test("an id owned by another customer: 409, and it stays the other customer's", async () => {
    const i = await createInstallation(h, w.A)
    expectProblem(await h.request('POST', '/api/installations', { token: h.token(w.B), body: { installation_id: i.installation_id, description: 'x' } }), 409)
    expectProblem(await h.request('POST', '/api/installations', { body: { installation_id: i.installation_id, description: 'x', organization_id: w.B } }), 409)
    expect(await readAsVendor(h, 'installations', i.installation_id!)).toEqual(i)
    expect((await h.request('GET', `/api/installations/${i.installation_id}`, { token: h.token(w.B) })).status).toBe(404)
  })

  test('organization_id: required for the vendor; must be a customer; unknown or another customer 404', async () => {
    const post = (token: string, body: Record<string, unknown>) =>
      h.request('POST', '/api/installations', { token, body: { installation_id: crypto.randomUUID(), description: 'x', ...body } })
    expectProblem(await post(h.vendorToken, {}), 400)
    expectProblem(await post(h.vendorToken, { organization_id: w.BP }), 400)
    expectProblem(await post(h.vendorToken, { organization_id: w.V }), 400)
    expectProblem(await post(h.vendorToken, { organization_id: crypto.randomUUID() }), 404)
    expectProblem(await post(h.token(w.A), { organization_id: w.B }), 404)
    expectProblem(await post(h.token(w.AP), { organization_id: w.B }), 404)
    expectProblem(await post(h.token(w.A, 'viewer'), { organization_id: w.B }), 404)
    expect((await post(h.token(w.AP), { organization_id: w.A })).status).toBe(201)
    const byVendor = await post(h.vendorToken, { organization_id: w.B })
    expect(byVendor.status).toBe(201)
    expect((await h.request('GET', `/api/installations/${byVendor.body.installation.installation_id}`, { token: h.token(w.B) })).status).toBe(200)
  })

  test('bad bodies: 400; wrong content type 415; over 64 KiB 413; no token 401', async () => {
    const token = h.token(w.A)
    const id = crypto.randomUUID()
    for (const body of [undefined, {}, { installation_id: id }, { description: 'x' }, { installation_id: 'dev-1', description: 'x' }, { installation_id: id, description: '' }, { installation_id: id, description: ' ' }, { installation_id: id, description: 'x'.repeat(1025) }, { installation_id: id, description: 1 }, '[1']) {
      expectProblem(await h.request('POST', '/api/installations', { token, body }), 400)
    }
    const good = { installation_id: id, description: 'x' }
    expectProblem(await h.request('POST', '/api/installations', { token, body: JSON.stringify(good), headers: { 'content-type': 'application/xml' } }), 415)
    expectProblem(await h.request('POST', '/api/installations', { token, body: { ...good, description: 'x'.repeat(66 * 1024) } }), 413)
    expectProblem(await h.request('POST', '/api/installations', { token: null, body: good }), 401)
    expectProblem(await h.request('GET', `/api/installations/${id}`), 404)
    expect((await h.request('POST', '/api/installations', { token, body: { ...good, description: 'y'.repeat(1024) } })).status).toBe(201)
  })
})

describe('GET /api/installations/{id}', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('exact shape; malformed 400; unknown 404; no token 401', async () => {
    const i = await createInstallation(h, w.A)
    const res = await h.request('GET', `/api/installations/${i.installation_id!.toUpperCase()}`)
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['installation', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(res.body.installation).toEqual(i)
    expectProblem(await h.request('GET', '/api/installations/not-one'), 400)
    expectProblem(await h.request('GET', `/api/installations/${crypto.randomUUID()}`), 404)
    expectProblem(await h.request('GET', `/api/installations/${i.installation_id}`, { token: null }), 401)
  })
})

describe('PATCH /api/installations/{id}', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('updates the description and modified only', async () => {
    const i = await createInstallation(h, w.A)
    const res = await h.request('PATCH', `/api/installations/${i.installation_id}`, { body: { description: 'Pixel 8 Pro' } })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['installation', 'trace_id'])
    expect({ ...res.body.installation, modified: null }).toEqual({ ...i, description: 'Pixel 8 Pro', modified: null })
    expect(res.body.installation.modified > i.modified!).toBe(true)
    expect(await readAsVendor(h, 'installations', i.installation_id!)).toEqual(res.body.installation)
  })

  test('bad bodies 400 and nothing changes; 415; 413; malformed id 400; unknown 404; no token 401', async () => {
    const i = await createInstallation(h, w.A)
    for (const body of [undefined, {}, { description: '' }, { description: false }, { description: 'x'.repeat(1025) }, '{']) {
      expectProblem(await h.request('PATCH', `/api/installations/${i.installation_id}`, { body }), 400)
    }
    const path = `/api/installations/${i.installation_id}`
    expectProblem(await h.request('PATCH', path, { body: '{"description":"x"}', headers: { 'content-type': 'text/plain' } }), 415)
    expectProblem(await h.request('PATCH', path, { body: { description: 'x'.repeat(65 * 1024) } }), 413)
    // Only the description can change.
    const res = await h.request('PATCH', path, { body: { description: 'ok', state: 'verified', installation_id: crypto.randomUUID() } })
    expect(res.status).toBe(200)
    expect({ ...res.body.installation, modified: null }).toEqual({ ...i, description: 'ok', modified: null })
    expectProblem(await h.request('PATCH', '/api/installations/1', { body: { description: 'x' } }), 400)
    expectProblem(await h.request('PATCH', `/api/installations/${crypto.randomUUID()}`, { body: { description: 'x' } }), 404)
    expectProblem(await h.request('PATCH', `/api/installations/${i.installation_id}`, { token: null, body: { description: 'x' } }), 401)
  })
})

describe('PATCH /api/installations/{id}/suspend and /verify: the state machine', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  async function expectTransition(id: string, action: 'suspend' | 'verify', to: string) {
    const before = await readAsVendor(h, 'installations', id)
    const res = await act(id, action)
    expect({ action, status: res.status }).toEqual({ action, status: 200 })
    expect(Object.keys(res.body).sort()).toEqual(['installation', 'trace_id'])
    expect(Object.keys(res.body.installation).sort()).toEqual(KEYS)
    expect({ ...res.body.installation, modified: null }).toEqual({ ...before, state: to, modified: null })
    expect(res.body.installation.modified > before.modified!).toBe(true)
    expect(await readAsVendor(h, 'installations', id)).toEqual(res.body.installation)
  }

  async function expectRefused(id: string, action: 'suspend' | 'verify') {
    const before = await readAsVendor(h, 'installations', id)
    expectProblem(await act(id, action), 409)
    expect(await readAsVendor(h, 'installations', id)).toEqual(before)
  }

  test('unregistered → verified → suspended → verified; verifying a verified one 409', async () => {
    const { installation_id: id } = await createInstallation(h, w.A)
    await expectTransition(id!, 'verify', 'verified')
    await expectRefused(id!, 'verify')
    await expectTransition(id!, 'suspend', 'suspended')
    await expectTransition(id!, 'verify', 'verified')
  })

  test('unregistered → suspended; suspending a suspended one 409', async () => {
    const { installation_id: id } = await createInstallation(h, w.A)
    await expectTransition(id!, 'suspend', 'suspended')
    await expectRefused(id!, 'suspend')
    await expectTransition(id!, 'verify', 'verified')
    await expectTransition(id!, 'suspend', 'suspended')
    await expectRefused(id!, 'suspend')
  })

  test('malformed 400; unknown 404; no token 401; an unknown action 404', async () => {
    expectProblem(await act('x', 'verify'), 400)
    expectProblem(await act(crypto.randomUUID(), 'suspend'), 404)
    const i = await createInstallation(h, w.A)
    expectProblem(await h.request('PATCH', `/api/installations/${i.installation_id}/verify`, { token: null }), 401)
    expectProblem(await h.request('PATCH', `/api/installations/${i.installation_id}/activate`), 404)
    expect(await readAsVendor(h, 'installations', i.installation_id!)).toEqual(i)
  })
})

describe('automatic verification (--auto-verify-installations)', () => {
  test('new installations start verified, also those an enrollment creates; existing ones are returned as they are', async () => {
    const auto = await createHarness({ autoVerifyInstallations: true })
    try {
      const w = await world(auto)
      const created = await createInstallation(auto, w.A, 'x')
      expect(created.state).toBe('verified')
      const suspended = await auto.request('PATCH', `/api/installations/${created.installation_id}/suspend`)
      expect(suspended.body.installation.state).toBe('suspended')
      const again = await auto.request('POST', '/api/installations', { token: auto.token(w.A), body: { installation_id: created.installation_id, description: 'x' } })
      expect(again.status).toBe(200)
      expect(again.body.installation.state).toBe('suspended')
      // Verify of a verified one is still a no-op.
      const other = await createInstallation(auto, w.A, 'y')
      expectProblem(await auto.request('PATCH', `/api/installations/${other.installation_id}/verify`), 409, 'already_in_state')

      const app = await auto.request('POST', '/api/applications', { body: { organization_id: w.A, description: 'App' } })
      const installationId = crypto.randomUUID()
      const enrollment = await auto.request('POST', '/api/enrollments', {
        token: auto.token(w.AP),
        body: {
          enrollment_id: crypto.randomUUID(),
          consumer_id: crypto.randomUUID(),
          installation_id: installationId,
          application_id: app.body.application.application_id,
          environment: 'PRODUCTION',
          installation_description: 'by enrollment',
        },
      })
      expect(enrollment.status).toBe(201)
      expect(await readAsVendor(auto, 'installations', installationId)).toMatchObject({ description: 'by enrollment', state: 'verified' })
    } finally {
      await auto.close()
    }
  })

  test('without the switch they start unregistered, also those an enrollment creates', async () => {
    const w = await world()
    const app = await h.request('POST', '/api/applications', { body: { organization_id: w.A, description: 'App' } })
    const installationId = crypto.randomUUID()
    const enrollment = await h.request('POST', '/api/enrollments', {
      body: {
        enrollment_id: crypto.randomUUID(),
        consumer_id: crypto.randomUUID(),
        installation_id: installationId,
        application_id: app.body.application.application_id,
        environment: 'PRODUCTION',
        installation_description: 'by enrollment',
      },
    })
    expect(enrollment.status).toBe(201)
    expect((await readAsVendor(h, 'installations', installationId)).state).toBe('unregistered')
  })
})

describe('GET /api/installations: shapes', () => {
  let w: Tenants
  let ofA: Record<string, string>[]
  beforeAll(async () => {
    w = await world()
    ofA = [await createInstallation(h, w.A, 'one'), await createInstallation(h, w.A, 'two'), await createInstallation(h, w.A, 'three')]
    await createInstallation(h, w.B, 'other')
  })

  test('without page: installations and trace_id only', async () => {
    const res = await h.request('GET', '/api/installations', { token: h.token(w.A) })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['installations', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(res.body.installations).toEqual(ofA)
  })

  test('page_size without page: the unpaged shape, at most page_size records', async () => {
    const res = await h.request('GET', '/api/installations?page_size=2', { token: h.token(w.A) })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['installations', 'trace_id'])
    expect(res.body.installations).toEqual(ofA.slice(0, 2))
  })

  test('with page: installations, total, page, page_size; no trace_id', async () => {
    const res = await h.request('GET', '/api/installations?page=2&page_size=2', { token: h.token(w.AP, 'viewer') })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ installations: ofA.slice(2), total: ofA.length, page: 2, page_size: 2 })
    const defaults = await h.request('GET', '/api/installations?page=1', { token: h.token(w.A) })
    expect(defaults.body).toEqual({ installations: ofA, total: ofA.length, page: 1, page_size: 100 })
  })

  test('no token 401', async () => {
    expectProblem(await h.request('GET', '/api/installations', { token: null }), 401)
  })
})
