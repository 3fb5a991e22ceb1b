/**
 * Organization environments over HTTP: view, set default, add, remove; customers not enabled,
 * partners, and the 400/404/409 rules of docs/api.md "Organization environments". Who may do each
 * (every role and scope of docs/api.md "Authentication, roles and scope"): authorization-matrix.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { MAX_ENVIRONMENTS } from '../../src/modules/shared/model'
import { createHarness, type Harness } from '../support/harness'
import { expectProblem } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

const VIEW_KEYS = ['default', 'organization_id', 'supported', 'trace_id']
const CHANGE_KEYS = ['application_id', 'default', 'supported', 'trace_id']

const path = (id: string) => `/api/organizations/${id}/environments`

/** Environments and organization record as the vendor sees them. */
async function snapshot(id: string) {
  const envs = await h.request('GET', path(id))
  const org = await h.request('GET', `/api/organizations/${id}`)
  expect(org.status).toBe(200)
  return { envs: envs.status === 200 ? { default: envs.body.default, supported: envs.body.supported } : envs.status, org: org.body.organization }
}

async function enabledCustomer(supported = 'DEV,PROD,TEST', dflt = 'PROD') {
  return h.createCustomer('Enabled', { default: dflt, supported })
}

describe('view', () => {
  test('exact shape; id answered lowercase', async () => {
    const A = await enabledCustomer('prod,Dev,dev', 'dev')
    const res = await h.request('GET', path(A.toUpperCase()))
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(VIEW_KEYS)
    expect(res.body).toMatchObject({ organization_id: A, default: 'DEV', supported: 'DEV,PROD' })
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
  })

  test('not enabled customer, partner, vendor, unknown: 404; malformed id: 400', async () => {
    const N = await h.createCustomer('N')
    const A = await enabledCustomer()
    const P = await h.createPartner(A)
    for (const id of [N, P, h.vendorId, crypto.randomUUID()]) expectProblem(await h.request('GET', path(id)), 404, 'not_found')
    expectProblem(await h.request('GET', path('nope')), 400)
  })
})

describe('set default', () => {
  test('sets it (case-insensitive), answers organization_id, moves modified, keeps created', async () => {
    const A = await enabledCustomer()
    const before = await snapshot(A)
    const res = await h.request('PATCH', path(A.toUpperCase()), { body: { default: 'dev' } })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(VIEW_KEYS)
    expect(res.body).toMatchObject({ organization_id: A, default: 'DEV', supported: 'DEV,PROD,TEST' })
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const after = await snapshot(A)
    expect(after.envs).toEqual({ default: 'DEV', supported: 'DEV,PROD,TEST' })
    expect(after.org.created).toBe(before.org.created)
    expect(after.org.modified > before.org.modified).toBe(true)
  })

  test('setting the current default again is 200 and changes nothing', async () => {
    const A = await enabledCustomer()
    const before = await snapshot(A)
    const res = await h.request('PATCH', path(A), { body: { default: 'Prod' } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ organization_id: A, default: 'PROD', supported: 'DEV,PROD,TEST' })
    expect(await snapshot(A)).toEqual(before)
  })

  test('a default that is not supported is 409 and changes nothing', async () => {
    const A = await enabledCustomer()
    const before = await snapshot(A)
    expectProblem(await h.request('PATCH', path(A), { body: { default: 'QA' } }), 409)
    expect(await snapshot(A)).toEqual(before)
  })
})

describe('add', () => {
  test('adds (case-insensitive), answers application_id, sorted list, moves modified', async () => {
    const A = await enabledCustomer('PROD', 'PROD')
    const before = await snapshot(A)
    const res = await h.request('PATCH', path(A), { body: { environment: 'alpha' } })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(CHANGE_KEYS)
    expect(res.body).toMatchObject({ application_id: A, default: 'PROD', supported: 'ALPHA,PROD' })
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const middle = await snapshot(A)
    expect(middle.envs).toEqual({ default: 'PROD', supported: 'ALPHA,PROD' })
    expect(middle.org.modified > before.org.modified).toBe(true)
    const second = await h.request('PATCH', path(A), { body: { environment: 'Zeta_1' } })
    expect(second.body.supported).toBe('ALPHA,PROD,ZETA_1')
    const after = await snapshot(A)
    expect(after.org.modified > middle.org.modified).toBe(true)
    expect(after.org.created).toBe(before.org.created)
  })

  test('an environment already there (any case) is 409 and changes nothing', async () => {
    const A = await enabledCustomer()
    const before = await snapshot(A)
    for (const environment of ['DEV', 'dev', 'Prod']) expectProblem(await h.request('PATCH', path(A), { body: { environment } }), 409)
    expect(await snapshot(A)).toEqual(before)
  })

  test(`at most ${MAX_ENVIRONMENTS} environments: one more is 409 and changes nothing; a create with more is 400`, async () => {
    const names = Array.from({ length: MAX_ENVIRONMENTS }, (_, i) => `E${i}`)
    const full = await enabledCustomer(names.join(','), 'E0')
    const before = await snapshot(full)
    expectProblem(await h.request('PATCH', path(full), { body: { environment: 'ONE_MORE' } }), 409, 'too_many_environments')
    expect(await snapshot(full)).toEqual(before)
    expect((await h.request('DELETE', path(full), { body: { environment: 'E99' } })).status).toBe(200)
    expect((await h.request('PATCH', path(full), { body: { environment: 'ONE_MORE' } })).status).toBe(200)
    const tooMany = await h.request('POST', '/api/organizations', { body: { description: 'x', parent_id: h.vendorId, supported_environments: { default: 'E0', supported: [...names, 'E100'].join(',') } } })
    expectProblem(tooMany, 400, 'validation_failed')
  })
})

describe('remove', () => {
  test('removes (case-insensitive), answers application_id, moves modified', async () => {
    const A = await enabledCustomer()
    const before = await snapshot(A)
    const res = await h.request('DELETE', path(A.toUpperCase()), { body: { environment: 'test' } })
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(CHANGE_KEYS)
    expect(res.body).toMatchObject({ application_id: A, default: 'PROD', supported: 'DEV,PROD' })
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const after = await snapshot(A)
    expect(after.envs).toEqual({ default: 'PROD', supported: 'DEV,PROD' })
    expect(after.org.modified > before.org.modified).toBe(true)
    expect(after.org.created).toBe(before.org.created)
  })

  test('an environment not in the list is 404; the default is 409; both change nothing', async () => {
    const A = await enabledCustomer()
    const before = await snapshot(A)
    expectProblem(await h.request('DELETE', path(A), { body: { environment: 'QA' } }), 404, 'not_found')
    expectProblem(await h.request('DELETE', path(A), { body: { environment: 'prod' } }), 409)
    expect(await snapshot(A)).toEqual(before)
  })

  test('an environment still used by one of the customer\'s applications is 409 until no application uses it', async () => {
    const A = await enabledCustomer()
    const app = await h.request('POST', '/api/applications', { body: { organization_id: A, description: 'App', allowed_environments: 'dev' } })
    expect(app.status).toBe(201)
    const before = await snapshot(A)
    expectProblem(await h.request('DELETE', path(A), { body: { environment: 'DEV' } }), 409)
    expect(await snapshot(A)).toEqual(before)
    // Unused ones go.
    expect((await h.request('DELETE', path(A), { body: { environment: 'TEST' } })).status).toBe(200)
    // Another customer's application does not hold this customer's environment.
    const B = await enabledCustomer()
    expect((await h.request('DELETE', path(B), { body: { environment: 'DEV' } })).status).toBe(200)
  })

  test('the last non-default environments can go, leaving only the default', async () => {
    const A = await enabledCustomer()
    expect((await h.request('DELETE', path(A), { body: { environment: 'DEV' } })).status).toBe(200)
    const res = await h.request('DELETE', path(A), { body: { environment: 'TEST' } })
    expect(res.status).toBe(200)
    expect(res.body.supported).toBe('PROD')
    expectProblem(await h.request('DELETE', path(A), { body: { environment: 'PROD' } }), 409)
  })

  test('a removed environment can be added back and made default', async () => {
    const A = await enabledCustomer()
    await h.request('DELETE', path(A), { body: { environment: 'DEV' } })
    expect((await h.request('PATCH', path(A), { body: { default: 'DEV' } })).status).toBe(409)
    expect((await h.request('PATCH', path(A), { body: { environment: 'DEV' } })).status).toBe(200)
    const res = await h.request('PATCH', path(A), { body: { default: 'DEV' } })
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({ default: 'DEV', supported: 'DEV,PROD,TEST' })
  })
})

describe('invalid bodies are 400 and change nothing', () => {
  test('PATCH: both, neither, bad names, mistyped, no body, invalid JSON', async () => {
    const A = await enabledCustomer()
    const before = await snapshot(A)
    const bodies: unknown[] = [
      { default: 'DEV', environment: 'QA' },
      { default: 'PROD', environment: 'PROD' },
      {},
      { other: 'DEV' },
      { default: '' },
      { environment: '' },
      { default: 'bad name' },
      { environment: 'a.b' },
      { environment: 'É' },
      { environment: 'X'.repeat(33) },
      { environment: 5 },
      { default: null },
      { environment: ['DEV'] },
      undefined,
      '{"environment":',
      '[]',
    ]
    for (const body of bodies) {
      const res = await h.request('PATCH', path(A), { body })
      expect({ body, status: res.status }).toEqual({ body, status: 400 })
      expectProblem(res, 400)
    }
    expect(await snapshot(A)).toEqual(before)
  })

  test('both or neither of default and environment: a validation problem naming the body', async () => {
    const A = await enabledCustomer()
    for (const body of [{}, { default: 'DEV', environment: 'QA' }]) {
      const res = await h.request('PATCH', path(A), { body })
      expectProblem(res, 400, 'validation_failed')
      expect(res.body.errors).toHaveLength(1)
      expect(res.body.errors[0].path).toBe('body')
    }
  })

  test('DELETE: missing, bad name, mistyped, no body', async () => {
    const A = await enabledCustomer()
    const before = await snapshot(A)
    for (const body of [{}, { default: 'DEV' }, { environment: 'a b' }, { environment: 1 }, { environment: '' }, undefined, 'nope']) {
      const res = await h.request('DELETE', path(A), { body })
      expect({ body, status: res.status }).toEqual({ body, status: 400 })
    }
    expect(await snapshot(A)).toEqual(before)
  })

  test('names of 32 characters are accepted', async () => {
    const A = await enabledCustomer()
    const name = 'q'.repeat(32)
    const res = await h.request('PATCH', path(A), { body: { environment: name } })
    expect(res.status).toBe(200)
    expect(res.body.supported).toBe(`DEV,PROD,${'Q'.repeat(32)},TEST`)
  })
})

describe('customers not enabled, partners, the vendor: every operation 404 whatever the body', () => {
  test('404 for PATCH and DELETE, valid or invalid body, and nothing changes', async () => {
    const N = await h.createCustomer('N')
    const A = await enabledCustomer()
    const P = await h.createPartner(A)
    for (const id of [N, P, h.vendorId, crypto.randomUUID()]) {
      const before = await h.request('GET', `/api/organizations/${id}`)
      for (const body of [{ default: 'PRODUCTION' }, { environment: 'DEV' }, {}, 'not json']) {
        expectProblem(await h.request('PATCH', path(id), { body }), 404)
      }
      for (const body of [{ environment: 'PRODUCTION' }, {}, undefined]) {
        expectProblem(await h.request('DELETE', path(id), { body }), 404)
      }
      const after = await h.request('GET', `/api/organizations/${id}`)
      expect(after.status).toBe(before.status)
      if (before.status === 200) expect(after.body.organization).toEqual(before.body.organization)
    }
  })

  test('a customer not enabled cannot be enabled by adding an environment', async () => {
    const N = await h.createCustomer('N')
    expectProblem(await h.request('PATCH', path(N), { body: { environment: 'DEV' } }), 404)
    expectProblem(await h.request('GET', path(N)), 404)
  })
})
