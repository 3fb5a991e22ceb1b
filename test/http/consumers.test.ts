/**
 * Consumers over HTTP: create (201, or 200 for an existing one), view, suspend, activate, list
 * shape; ownership by one customer (409 for another's id) and the customer a vendor token names
 * (docs/api.md "Consumers"). Filters and paging: lists.test.ts. Who may do each (every role and
 * scope of docs/api.md "Authentication, roles and scope"): authorization-matrix.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'
import { createConsumer, readAsVendor, tenants, TIMESTAMP, type Tenants, expectProblem } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// helpers

const KEYS = ['consumer_id', 'created', 'modified', 'state']

const world = () => tenants(h, { A: { default: 'PROD', supported: 'PROD' } })

async function readAs(token: string, id: string) {
  return (await h.request('GET', `/api/consumers/${id}`, { token })).status
}

// ---------------------------------------------------------------------------------------------

describe('POST /api/consumers', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('201 with exactly the consumer fields; id answered lowercase; state active', async () => {
    const id = crypto.randomUUID()
    const res = await h.request('POST', '/api/consumers', { token: h.token(w.A), body: { consumer_id: id.toUpperCase() } })
    expect(res.status).toBe(201)
    expect(Object.keys(res.body).sort()).toEqual(['consumer', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(Object.keys(res.body.consumer).sort()).toEqual(KEYS)
    expect(res.body.consumer).toMatchObject({ consumer_id: id, state: 'active' })
    expect(res.body.consumer.created).toMatch(TIMESTAMP)
    expect(res.body.consumer.modified).toBe(res.body.consumer.created)
    expect(await readAsVendor(h, 'consumers', id)).toEqual(res.body.consumer)
  })

  test('an existing consumer of the same customer: 200, the record unchanged', async () => {
    const created = await createConsumer(h, w.A)
    const suspended = await h.request('PATCH', `/api/consumers/${created.consumer_id}/suspend`)
    expect(suspended.status).toBe(200)
    for (const token of [h.token(w.A), h.token(w.AP, 'application_admin')]) {
      const again = await h.request('POST', '/api/consumers', { token, body: { consumer_id: created.consumer_id } })
      expect(again.status).toBe(200)
      expect(again.body.consumer).toEqual(suspended.body.consumer)
    }
    const vendor = await h.request('POST', '/api/consumers', { body: { consumer_id: created.consumer_id, organization_id: w.A } })
    expect(vendor.status).toBe(200)
    expect(vendor.body.consumer).toEqual(suspended.body.consumer)
    expect(await readAsVendor(h, 'consumers', created.consumer_id!)).toEqual(suspended.body.consumer)
  })

  test('an id owned by another customer: 409, and it stays the other customer\'s', async () => {
    const created = await createConsumer(h, w.A)
    expectProblem(await h.request('POST', '/api/consumers', { token: h.token(w.B), body: { consumer_id: created.consumer_id } }), 409)
    expectProblem(await h.request('POST', '/api/consumers', { token: h.token(w.BP), body: { consumer_id: created.consumer_id } }), 409)
    expectProblem(await h.request('POST', '/api/consumers', { body: { consumer_id: created.consumer_id, organization_id: w.B } }), 409)
    expect(await readAsVendor(h, 'consumers', created.consumer_id!)).toEqual(created)
    expect(await readAs(h.token(w.A), created.consumer_id!)).toBe(200)
    expect(await readAs(h.token(w.B), created.consumer_id!)).toBe(404)
  })

  test('the owning customer: the token\'s; a partner\'s customer; for the vendor the one named', async () => {
    const byPartner = await h.request('POST', '/api/consumers', { token: h.token(w.AP), body: { consumer_id: crypto.randomUUID() } })
    expect(byPartner.status).toBe(201)
    const byVendor = await h.request('POST', '/api/consumers', { body: { consumer_id: crypto.randomUUID(), organization_id: w.B } })
    expect(byVendor.status).toBe(201)
    const named = await h.request('POST', '/api/consumers', { token: h.token(w.A), body: { consumer_id: crypto.randomUUID(), organization_id: w.A } })
    expect(named.status).toBe(201)
    const partnerNamed = await h.request('POST', '/api/consumers', { token: h.token(w.AP), body: { consumer_id: crypto.randomUUID(), organization_id: w.A } })
    expect(partnerNamed.status).toBe(201)
    for (const [res, owner, other] of [[byPartner, w.A, w.B], [byVendor, w.B, w.A], [named, w.A, w.B], [partnerNamed, w.A, w.B]] as const) {
      expect(await readAs(h.token(owner, 'viewer'), res.body.consumer.consumer_id)).toBe(200)
      expect(await readAs(h.token(other, 'viewer'), res.body.consumer.consumer_id)).toBe(404)
    }
  })

  test('organization_id: missing for the vendor 400; a partner, the vendor 400; unknown or another customer 404', async () => {
    const post = (token: string, body: unknown) => h.request('POST', '/api/consumers', { token, body })
    const id = crypto.randomUUID()
    expectProblem(await post(h.vendorToken, { consumer_id: id }), 400)
    expectProblem(await post(h.vendorToken, { consumer_id: id, organization_id: w.AP }), 400)
    expectProblem(await post(h.vendorToken, { consumer_id: id, organization_id: w.V }), 400)
    expectProblem(await post(h.token(w.A), { consumer_id: id, organization_id: w.AP }), 400)
    expectProblem(await post(h.token(w.AP), { consumer_id: id, organization_id: w.AP }), 400)
    expectProblem(await post(h.vendorToken, { consumer_id: id, organization_id: crypto.randomUUID() }), 404)
    expectProblem(await post(h.token(w.A), { consumer_id: id, organization_id: w.B }), 404)
    expectProblem(await post(h.token(w.AP), { consumer_id: id, organization_id: w.BP }), 404)
    expectProblem(await post(h.token(w.A), { consumer_id: id, organization_id: 'acme' }), 400)
    // An unknown organization outranks a bad rest of the body, and the role.
    expectProblem(await post(h.vendorToken, { consumer_id: 'x', organization_id: crypto.randomUUID() }), 404)
    expectProblem(await post(h.token(w.A, 'viewer'), { consumer_id: id, organization_id: w.B }), 404)
    expectProblem(await h.request('GET', `/api/consumers/${id}`), 404)
  })

  test('bad bodies: 400; wrong content type 415; over 64 KiB 413; no token 401', async () => {
    const token = h.token(w.A)
    for (const body of [undefined, {}, { consumer_id: 'consumer-1' }, { consumer_id: 5 }, { consumer_id: null }, '{', '"x"']) {
      expectProblem(await h.request('POST', '/api/consumers', { token, body }), 400)
    }
    const id = crypto.randomUUID()
    expectProblem(await h.request('POST', '/api/consumers', { token, body: JSON.stringify({ consumer_id: id }), headers: { 'content-type': 'text/plain' } }), 415)
    expectProblem(await h.request('POST', '/api/consumers', { token, body: { consumer_id: id, pad: 'x'.repeat(65 * 1024) } }), 413)
    expectProblem(await h.request('POST', '/api/consumers', { token: null, body: { consumer_id: id } }), 401)
    expectProblem(await h.request('GET', `/api/consumers/${id}`), 404)
  })
})

describe('GET /api/consumers/{id}', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('exact shape; malformed 400; unknown 404; no token 401', async () => {
    const c = await createConsumer(h, w.A)
    const res = await h.request('GET', `/api/consumers/${c.consumer_id!.toUpperCase()}`)
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['consumer', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(res.body.consumer).toEqual(c)
    expectProblem(await h.request('GET', '/api/consumers/12345'), 400)
    expectProblem(await h.request('GET', `/api/consumers/${crypto.randomUUID()}`), 404)
    expectProblem(await h.request('GET', `/api/consumers/${c.consumer_id}`, { token: null }), 401)
  })
})

describe('PATCH /api/consumers/{id}/suspend and /activate', () => {
  let w: Tenants
  beforeAll(async () => (w = await world()))

  test('active → suspended → active with modified increasing; no-ops 409', async () => {
    const c = await createConsumer(h, w.A)
    expectProblem(await h.request('PATCH', `/api/consumers/${c.consumer_id}/activate`), 409, 'already_in_state')
    const suspended = await h.request('PATCH', `/api/consumers/${c.consumer_id}/suspend`)
    expect(suspended.status).toBe(200)
    expect(Object.keys(suspended.body).sort()).toEqual(['consumer', 'trace_id'])
    expect(Object.keys(suspended.body.consumer).sort()).toEqual(KEYS)
    expect(suspended.body.consumer).toMatchObject({ consumer_id: c.consumer_id, state: 'suspended', created: c.created })
    expect(suspended.body.consumer.modified > c.modified!).toBe(true)
    expectProblem(await h.request('PATCH', `/api/consumers/${c.consumer_id}/suspend`), 409, 'already_in_state')
    expect(await readAsVendor(h, 'consumers', c.consumer_id!)).toEqual(suspended.body.consumer)
    const active = await h.request('PATCH', `/api/consumers/${c.consumer_id}/activate`)
    expect(active.status).toBe(200)
    expect(active.body.consumer.state).toBe('active')
    expect(active.body.consumer.modified > suspended.body.consumer.modified).toBe(true)
  })

  test('malformed 400; unknown 404; no token 401', async () => {
    expectProblem(await h.request('PATCH', '/api/consumers/abc/suspend'), 400)
    expectProblem(await h.request('PATCH', `/api/consumers/${crypto.randomUUID()}/activate`), 404)
    const c = await createConsumer(h, w.A)
    expectProblem(await h.request('PATCH', `/api/consumers/${c.consumer_id}/suspend`, { token: null }), 401)
    expect((await readAsVendor(h, 'consumers', c.consumer_id!)).state).toBe('active')
  })
})

describe('GET /api/consumers', () => {
  let w: Tenants
  let ofA: Record<string, string>[]
  beforeAll(async () => {
    w = await world()
    ofA = [await createConsumer(h, w.A), await createConsumer(h, w.A)]
    await createConsumer(h, w.B)
  })

  test('shape: consumers, total, page_size; no page unless sent; no trace_id', async () => {
    const res = await h.request('GET', '/api/consumers', { token: h.token(w.A) })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['consumers', 'page_size', 'total'])
    expect(res.body).toEqual({ consumers: ofA, total: ofA.length, page_size: 100 })
    const paged = await h.request('GET', '/api/consumers?page=1&page_size=1', { token: h.token(w.A) })
    expect(paged.status).toBe(200)
    expect(paged.body).toEqual({ consumers: [ofA[0]], total: ofA.length, page: 1, page_size: 1 })
    const sized = await h.request('GET', '/api/consumers?page_size=1', { token: h.token(w.A) })
    expect(sized.body).toEqual({ consumers: [ofA[0]], total: ofA.length, page_size: 1 })
  })

  test('a customer without consumers: an empty array, total 0', async () => {
    const C = await h.createCustomer('C')
    const res = await h.request('GET', '/api/consumers', { token: h.token(C, 'viewer') })
    expect(res.body).toEqual({ consumers: [], total: 0, page_size: 100 })
  })

  test('no token 401', async () => {
    expectProblem(await h.request('GET', '/api/consumers', { token: null }), 401)
  })
})
