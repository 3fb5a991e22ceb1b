/**
 * Organizations over HTTP: list, view, create, update, suspend, activate; out of scope answered
 * exactly like a missing id, field sets, formats, the rules of docs/api.md "Organizations". Who may do
 * each (every role and scope of docs/api.md "Authentication, roles and scope"): authorization-matrix.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { MAX_PARTNERS_PER_CUSTOMER } from '../../src/modules/shared/limits'
import { OrganizationService } from '../../src/modules/organizations/service'
import type { Organization } from '../../src/storage/records'
import type { Role } from '../../src/auth/tokens'
import { createHarness, type Harness } from '../support/harness'
import { tenants, TIMESTAMP, UUID_LOWER, expectProblem } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// helpers

const SUMMARY_KEYS = ['created', 'description', 'modified', 'organization_id', 'state']
const FULL_KEYS = ['created', 'description', 'modified', 'organization_id', 'organization_type', 'parent_id', 'state']

type World = Record<'V' | 'A' | 'AP' | 'B' | 'BP', string>

/** The vendor, customer A (enabled for environments) with partner AP, customer B with partner BP. */
async function world(): Promise<World> {
  return tenants(h, { A: { default: 'PROD', supported: 'DEV,PROD' } })
}

/** The organization as the vendor sees it (a read that never depends on the record under test). */
interface Summary {
  organization_id: string
  description: string
  state: string
  created: string
  modified: string
}

async function read(id: string): Promise<Summary> {
  const res = await h.request('GET', `/api/organizations/${id}`)
  expect(res.status).toBe(200)
  return res.body.organization
}

async function listIds(token?: string): Promise<string[]> {
  const res = await h.request('GET', '/api/organizations', { token })
  expect(res.status).toBe(200)
  return res.body.organizations.map((o: { organization_id: string }) => o.organization_id)
}

async function setState(id: string, action: 'suspend' | 'activate') {
  const res = await h.request('PATCH', `/api/organizations/${id}/${action}`)
  expect(res.status).toBe(200)
}

// ---------------------------------------------------------------------------------------------
// reads

describe('GET /api/organizations and /api/organizations/{id}', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('the vendor is listed first, with organization_type vendor and parent_id null', async () => {
    const res = await h.request('GET', '/api/organizations')
    expect(res.status).toBe(200)
    expect(res.body.organizations[0].organization_id).toBe(h.vendorId)
    expect(res.body.organizations[0].description).toBe('Vendor')
    // Its full record, as an update answers it.
    const update = await h.request('PATCH', `/api/organizations/${h.vendorId}`, { body: { description: 'Vendor' } })
    expect(update.status).toBe(200)
    expect(update.body.organization.organization_type).toBe('vendor')
    expect(update.body.organization.parent_id).toBeNull()
    expect(Object.keys(update.body.organization).sort()).toEqual(FULL_KEYS)
  })

  test('list response shape: organizations of summary records and a trace_id', async () => {
    const res = await h.request('GET', '/api/organizations')
    expect(Object.keys(res.body).sort()).toEqual(['organizations', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    expect(res.headers.get('content-type')).toStartWith('application/json')
    for (const org of res.body.organizations) {
      expect(Object.keys(org).sort()).toEqual(SUMMARY_KEYS)
      expect(org.organization_id).toMatch(UUID_LOWER)
      expect(org.created).toMatch(TIMESTAMP)
      expect(org.modified).toMatch(TIMESTAMP)
      expect(['active', 'suspended']).toContain(org.state)
    }
  })

  test('view response shape: organization summary and a trace_id', async () => {
    const res = await h.request('GET', `/api/organizations/${w.AP}`)
    expect(res.status).toBe(200)
    expect(Object.keys(res.body).sort()).toEqual(['organization', 'trace_id'])
    expect(Object.keys(res.body.organization).sort()).toEqual(SUMMARY_KEYS)
    expect(res.body.organization).toMatchObject({ organization_id: w.AP, description: 'AP', state: 'active' })
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
  })

  test('identifiers sent in uppercase are answered in lowercase', async () => {
    const res = await h.request('GET', `/api/organizations/${w.A.toUpperCase()}`)
    expect(res.status).toBe(200)
    expect(res.body.organization.organization_id).toBe(w.A)
  })

  test('a malformed identifier is 400, a well-formed unknown one 404', async () => {
    expectProblem(await h.request('GET', '/api/organizations/not-a-uuid'), 400)
    expectProblem(await h.request('GET', `/api/organizations/${w.A}x`), 400)
    expectProblem(await h.request('GET', `/api/organizations/${crypto.randomUUID()}`), 404, 'not_found')
  })

  test('out of scope is 404 exactly like a missing id: a customer reading the vendor and another tenant; a partner its customer, a sibling partner, the vendor', async () => {
    const sibling = await h.createPartner(w.A, 'AP2')
    const cases: [string, string[]][] = [
      [h.token(w.A, 'viewer'), [w.V, w.B, w.BP]],
      [h.token(w.AP, 'admin'), [w.V, w.A, sibling, w.B, w.BP]],
    ]
    const strip = (res: { status: number; body: Record<string, unknown> }) => ({ status: res.status, body: { ...res.body, trace_id: null } })
    for (const [token, ids] of cases) {
      const missing = await h.request('GET', `/api/organizations/${crypto.randomUUID()}`, { token })
      expectProblem(missing, 404)
      for (const id of ids) expect({ id, ...strip(await h.request('GET', `/api/organizations/${id}`, { token })) }).toEqual({ id, ...strip(missing) })
    }
  })

  test('a customer lists itself and all its partners, in creation order, and not a later customer', async () => {
    const C = await h.createCustomer('C')
    const p1 = await h.createPartner(C, 'p1')
    await h.createCustomer('D')
    const p2 = await h.request('POST', '/api/organizations', { token: h.token(C), body: { description: 'p2' } })
    expect(p2.status).toBe(201)
    const p3 = await h.createPartner(C, 'p3')
    expect(await listIds(h.token(C, 'viewer'))).toEqual([C, p1, p2.body.organization.organization_id, p3])
  })
})

test('the vendor list on a fresh service is exactly the organizations, in creation order, unmoved by updates', async () => {
  const fresh = await createHarness()
  try {
    const A = await fresh.createCustomer('A')
    const B = await fresh.createCustomer('B')
    const AP = await fresh.createPartner(A, 'AP')
    const BP = await fresh.createPartner(B, 'BP')
    expect((await fresh.request('PATCH', `/api/organizations/${A}`, { body: { description: 'A2' } })).status).toBe(200)
    expect((await fresh.request('PATCH', `/api/organizations/${B}/suspend`)).status).toBe(200)
    const res = await fresh.request('GET', '/api/organizations')
    expect(res.body.organizations.map((o: { organization_id: string }) => o.organization_id)).toEqual([fresh.vendorId, A, B, AP, BP])
    expect(res.body.organizations.map((o: { description: string }) => o.description)).toEqual(['Vendor', 'A2', 'B', 'AP', 'BP'])
    expect(res.body.organizations.map((o: { state: string }) => o.state)).toEqual(['active', 'active', 'suspended', 'active', 'active'])
  } finally {
    await fresh.close()
  }
})

// ---------------------------------------------------------------------------------------------
// create

describe('POST /api/organizations', () => {
  test('vendor creates a customer: 201, full record, active, timestamps equal on creation', async () => {
    const res = await h.request('POST', '/api/organizations', { body: { description: 'Acme', parent_id: h.vendorId } })
    expect(res.status).toBe(201)
    expect(Object.keys(res.body).sort()).toEqual(['organization', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const org = res.body.organization
    expect(Object.keys(org).sort()).toEqual(FULL_KEYS)
    expect(org).toMatchObject({ parent_id: h.vendorId, organization_type: 'customer', description: 'Acme', state: 'active' })
    expect(org.organization_id).toMatch(UUID_LOWER)
    expect(org.created).toMatch(TIMESTAMP)
    expect(org.modified).toBe(org.created)
    // It is really there.
    expect(await read(org.organization_id)).toEqual({
      organization_id: org.organization_id,
      description: 'Acme',
      state: 'active',
      created: org.created,
      modified: org.modified,
    })
  })

  test('vendor creates a partner by naming a customer as parent', async () => {
    const C = await h.createCustomer('C')
    const res = await h.request('POST', '/api/organizations', { body: { description: 'P', parent_id: C } })
    expect(res.status).toBe(201)
    expect(res.body.organization).toMatchObject({ parent_id: C, organization_type: 'partner', state: 'active' })
    expect(Object.keys(res.body.organization).sort()).toEqual(FULL_KEYS)
  })

  test('a parent_id sent in uppercase is answered lowercase', async () => {
    const res = await h.request('POST', '/api/organizations', { body: { description: 'Up', parent_id: h.vendorId.toUpperCase() } })
    expect(res.status).toBe(201)
    expect(res.body.organization.parent_id).toBe(h.vendorId)
    expect(res.body.organization.organization_type).toBe('customer')
  })

  test('a customer creates a partner of itself with parent_id omitted or its own id (any case)', async () => {
    const C = await h.createCustomer('C')
    const token = h.token(C)
    for (const body of [{ description: 'p1' }, { description: 'p2', parent_id: C }, { description: 'p3', parent_id: C.toUpperCase() }]) {
      const res = await h.request('POST', '/api/organizations', { token, body })
      expect(res.status).toBe(201)
      expect(res.body.organization).toMatchObject({ parent_id: C, organization_type: 'partner', description: body.description })
    }
    expect(await listIds(h.token(C, 'viewer'))).toHaveLength(4)
  })

  test('supported_environments is echoed uppercase, sorted, deduplicated, only when sent', async () => {
    const res = await h.request('POST', '/api/organizations', {
      body: { description: 'Env', parent_id: h.vendorId, supported_environments: { default: 'dev', supported: 'prod,Dev,staging,DEV' } },
    })
    expect(res.status).toBe(201)
    expect(Object.keys(res.body.organization).sort()).toEqual([...FULL_KEYS, 'supported_environments'].sort())
    expect(res.body.organization.supported_environments).toEqual({ default: 'DEV', supported: 'DEV,PROD,STAGING' })
    const id = res.body.organization.organization_id
    // Never on the other outputs.
    expect(Object.keys(await read(id)).sort()).toEqual(SUMMARY_KEYS)
    const update = await h.request('PATCH', `/api/organizations/${id}`, { body: { description: 'Env2' } })
    expect(Object.keys(update.body.organization).sort()).toEqual(FULL_KEYS)
    const envs = await h.request('GET', `/api/organizations/${id}/environments`)
    expect(envs.body).toMatchObject({ organization_id: id, default: 'DEV', supported: 'DEV,PROD,STAGING' })
  })

  test('supported_environments with a single environment', async () => {
    const res = await h.request('POST', '/api/organizations', {
      body: { description: 'One', parent_id: h.vendorId, supported_environments: { default: 'Prod', supported: 'prod' } },
    })
    expect(res.status).toBe(201)
    expect(res.body.organization.supported_environments).toEqual({ default: 'PROD', supported: 'PROD' })
  })

  test('without supported_environments the customer has none and its environment endpoints are 404', async () => {
    const res = await h.request('POST', '/api/organizations', { body: { description: 'Plain', parent_id: h.vendorId } })
    expect(res.status).toBe(201)
    expect(res.body.organization.supported_environments).toBeUndefined()
    expectProblem(await h.request('GET', `/api/organizations/${res.body.organization.organization_id}/environments`), 404)
  })

  test('descriptions: 1024 characters accepted; empty, blank and 1025 characters are 400', async () => {
    const long = 'x'.repeat(1024)
    const ok = await h.request('POST', '/api/organizations', { body: { description: long, parent_id: h.vendorId } })
    expect(ok.status).toBe(201)
    expect(ok.body.organization.description).toBe(long)
    const before = await listIds()
    for (const description of ['', '   ', ' \t\n ', 'y'.repeat(1025)]) {
      const res = await h.request('POST', '/api/organizations', { body: { description, parent_id: h.vendorId } })
      expectProblem(res, 400)
      expect(res.body.errors[0].path).toBe('body.description')
    }
    expect(await listIds()).toEqual(before)
  })

  test('missing or mistyped fields are 400 with the field path, and nothing is created', async () => {
    const before = await listIds()
    const cases: [unknown, string][] = [
      [{ parent_id: h.vendorId }, 'body.description'],
      [{ description: 5, parent_id: h.vendorId }, 'body.description'],
      [{ description: null, parent_id: h.vendorId }, 'body.description'],
      [{ description: 'x', parent_id: 'not-a-uuid' }, 'body.parent_id'],
      [{ description: 'x', parent_id: 42 }, 'body.parent_id'],
      [{ description: 'x', parent_id: h.vendorId, supported_environments: 'DEV' }, 'body.supported_environments'],
      [{ description: 'x', parent_id: h.vendorId, supported_environments: { default: 'DEV' } }, 'body.supported_environments.supported'],
      [{ description: 'x', parent_id: h.vendorId, supported_environments: { supported: 'DEV' } }, 'body.supported_environments.default'],
    ]
    for (const [body, path] of cases) {
      const res = await h.request('POST', '/api/organizations', { body })
      expectProblem(res, 400, 'validation_failed')
      expect({ body, paths: res.body.errors.map((e: { path: string }) => e.path) }).toEqual({ body, paths: [path] })
      expect(typeof res.body.errors[0].message).toBe('string')
    }
    expect(await listIds()).toEqual(before)
  })

  test('a body that is not an object is 400', async () => {
    for (const body of ['[]', '"text"', '42', 'null', 'true']) {
      expectProblem(await h.request('POST', '/api/organizations', { body }), 400)
    }
  })

  test('bad environment lists are 400: bad names (as a single name would be), empty entries, default not in supported', async () => {
    const before = await listIds()
    const cases = [
      { default: 'DEV', supported: '' },
      { default: 'DEV', supported: 'DEV,,PROD' },
      { default: 'DEV', supported: 'DEV,PR OD' },
      { default: 'DEV', supported: 'DEV,PRÖD' },
      { default: 'DEV', supported: `DEV,${'A'.repeat(33)}` },
      { default: 'D.V', supported: 'D.V' },
      { default: '', supported: 'DEV' },
      { default: 'QA', supported: 'DEV,PROD' },
      { default: 5, supported: 'DEV' },
      { default: 'DEV', supported: 5 },
    ]
    for (const supported_environments of [...cases, { default: 'DEV', supported: 'DEV,\u00a0PROD' }, { default: 'DEV', supported: `DEV,${'ß'.repeat(17)}` }]) {
      const res = await h.request('POST', '/api/organizations', { body: { description: 'x', parent_id: h.vendorId, supported_environments } })
      expect({ supported_environments, status: res.status }).toEqual({ supported_environments, status: 400 })
    }
    expect(await listIds()).toEqual(before)
    // 32 characters is the longest name.
    const max = 'A'.repeat(32)
    const ok = await h.request('POST', '/api/organizations', {
      body: { description: 'x', parent_id: h.vendorId, supported_environments: { default: max, supported: `${max},b_-9` } },
    })
    expect(ok.status).toBe(201)
    expect(ok.body.organization.supported_environments).toEqual({ default: max, supported: `${max},B_-9` })
    // Matched after uppercasing (docs/api.md "Conventions"): `ß` is `SS`, `ſ` is `S`; 17 `ß` make 34 letters (above: 400).
    const uppercased = await h.request('POST', '/api/organizations', {
      body: { description: 'x', parent_id: h.vendorId, supported_environments: { default: 'ß', supported: 'teſt,ß' } },
    })
    expect(uppercased.status).toBe(201)
    expect(uppercased.body.organization.supported_environments).toEqual({ default: 'SS', supported: 'SS,TEST' })
  })

  describe('parent_id rules (docs/api.md "Endpoints")', () => {
    let w: World
    beforeAll(async () => (w = await world()))

    async function rejected(token: string | undefined, body: unknown, status: number, field?: string) {
      const before = await listIds()
      const res = await h.request('POST', '/api/organizations', { token, body })
      expectProblem(res, status)
      if (field) expect(res.body.errors.map((e: { path: string }) => e.path)).toEqual([`body.${field}`])
      expect(await listIds()).toEqual(before)
      return res
    }

    test('a vendor caller must send parent_id: 400', async () => {
      await rejected(undefined, { description: 'x' }, 400, 'parent_id')
    })

    test("a vendor caller naming a partner: 400", async () => {
      await rejected(undefined, { description: 'x', parent_id: w.AP }, 400, 'parent_id')
    })

    test('a vendor caller naming an unknown organization: 404', async () => {
      const res = await rejected(undefined, { description: 'x', parent_id: crypto.randomUUID() }, 404)
      expect(res.body.code).toBe('not_found')
    })

    test('a customer caller naming another organization, known or not: 400', async () => {
      const token = h.token(w.A)
      for (const parent_id of [w.V, w.B, w.BP, w.AP, crypto.randomUUID()]) {
        await rejected(token, { description: 'x', parent_id }, 400, 'parent_id')
      }
    })

    test('supported_environments on a partner: 400, from the vendor or from a customer', async () => {
      const supported_environments = { default: 'DEV', supported: 'DEV' }
      await rejected(undefined, { description: 'x', parent_id: w.A, supported_environments }, 400, 'supported_environments')
      await rejected(h.token(w.A), { description: 'x', supported_environments }, 400, 'supported_environments')
      await rejected(h.token(w.A), { description: 'x', parent_id: w.A, supported_environments }, 400, 'supported_environments')
    })

    test('the vendor may create a partner under a suspended customer; its tokens work once the customer is active', async () => {
      const C = await h.createCustomer('C')
      await setState(C, 'suspend')
      const res = await h.request('POST', '/api/organizations', { body: { description: 'P', parent_id: C } })
      expect(res.status).toBe(201)
      const P = res.body.organization.organization_id
      expect((await h.request('GET', `/api/organizations/${P}`, { token: h.token(P, 'viewer') })).status).toBe(401)
      await setState(C, 'activate')
      expect((await h.request('GET', `/api/organizations/${P}`, { token: h.token(P, 'viewer') })).status).toBe(200)
    })

    test('an unknown parent is 404 even when the rest of the body is invalid too', async () => {
      await rejected(undefined, { description: '', parent_id: crypto.randomUUID() }, 404)
    })
  })

  describe('who may not create (docs/api.md "Authentication, roles and scope"; every role: authorization-matrix.test.ts)', () => {
    let w: World
    beforeAll(async () => (w = await world()))

    test('a role that may not create is 403 even with an invalid body', async () => {
      for (const token of [h.token(w.V, 'viewer'), h.token(w.A, 'application_admin'), h.token(w.AP, 'admin')]) {
        expectProblem(await h.request('POST', '/api/organizations', { token, body: '{not json' }), 403, 'forbidden')
        expectProblem(await h.request('POST', '/api/organizations', { token, body: { description: '' } }), 403, 'forbidden')
        expectProblem(await h.request('POST', '/api/organizations', { token }), 403, 'forbidden')
      }
    })
  })
})

// ---------------------------------------------------------------------------------------------
// update

describe('PATCH /api/organizations/{id}', () => {
  test('updates the description; modified strictly increases, created stays; full shape', async () => {
    const C = await h.createCustomer('Old')
    const before = await read(C)
    const first = await h.request('PATCH', `/api/organizations/${C.toUpperCase()}`, { body: { description: 'New' } })
    expect(first.status).toBe(200)
    expect(Object.keys(first.body).sort()).toEqual(['organization', 'trace_id'])
    expect(Object.keys(first.body.organization).sort()).toEqual(FULL_KEYS)
    expect(first.body.organization).toMatchObject({
      organization_id: C,
      parent_id: h.vendorId,
      organization_type: 'customer',
      description: 'New',
      state: 'active',
      created: before.created,
    })
    expect(first.body.organization.modified > before.modified).toBe(true)
    // The same description again is still an update.
    const second = await h.request('PATCH', `/api/organizations/${C}`, { body: { description: 'New' } })
    expect(second.status).toBe(200)
    expect(second.body.organization.modified > first.body.organization.modified).toBe(true)
    expect(second.body.organization.created).toBe(before.created)
    expect(await read(C)).toMatchObject({ description: 'New', modified: second.body.organization.modified })
  })

  test('a partner answers with its own type and parent', async () => {
    const C = await h.createCustomer('C')
    const P = await h.createPartner(C)
    const res = await h.request('PATCH', `/api/organizations/${P}`, { token: h.token(C), body: { description: 'P2' } })
    expect(res.status).toBe(200)
    expect(res.body.organization).toMatchObject({ organization_id: P, parent_id: C, organization_type: 'partner', description: 'P2' })
  })

  test('description rules: 1024 ok; empty, blank, 1025, missing, mistyped, no body are 400 and change nothing', async () => {
    const C = await h.createCustomer('Keep')
    const ok = await h.request('PATCH', `/api/organizations/${C}`, { body: { description: 'z'.repeat(1024) } })
    expect(ok.status).toBe(200)
    const before = await read(C)
    for (const body of [{ description: '' }, { description: '  ' }, { description: 'z'.repeat(1025) }, {}, { description: 7 }, undefined, '{"description":']) {
      const res = await h.request('PATCH', `/api/organizations/${C}`, { body })
      expect({ body, status: res.status }).toEqual({ body, status: 400 })
      expectProblem(res, 400)
    }
    expect(await read(C)).toEqual(before)
  })

  test('unknown id 404, malformed id 400', async () => {
    expectProblem(await h.request('PATCH', `/api/organizations/${crypto.randomUUID()}`, { body: { description: 'x' } }), 404)
    expectProblem(await h.request('PATCH', '/api/organizations/123', { body: { description: 'x' } }), 400)
  })
})

// ---------------------------------------------------------------------------------------------
// suspend and activate

describe('PATCH /api/organizations/{id}/suspend and /activate', () => {
  test('suspend then activate: state, full shape, modified strictly increasing, created kept', async () => {
    const C = await h.createCustomer('C')
    const before = await read(C)
    const suspended = await h.request('PATCH', `/api/organizations/${C.toUpperCase()}/suspend`)
    expect(suspended.status).toBe(200)
    expect(Object.keys(suspended.body).sort()).toEqual(['organization', 'trace_id'])
    expect(Object.keys(suspended.body.organization).sort()).toEqual(FULL_KEYS)
    expect(suspended.body.organization).toMatchObject({
      organization_id: C,
      parent_id: h.vendorId,
      organization_type: 'customer',
      state: 'suspended',
      created: before.created,
    })
    expect(suspended.body.organization.modified > before.modified).toBe(true)
    expect(await read(C)).toMatchObject({ state: 'suspended', modified: suspended.body.organization.modified })

    const activated = await h.request('PATCH', `/api/organizations/${C}/activate`)
    expect(activated.status).toBe(200)
    expect(activated.body.organization).toMatchObject({ organization_id: C, state: 'active', created: before.created })
    expect(activated.body.organization.modified > suspended.body.organization.modified).toBe(true)
    expect(await read(C)).toMatchObject({ state: 'active', modified: activated.body.organization.modified })
  })

  test('no-op transitions are 409 and change nothing', async () => {
    const C = await h.createCustomer('C')
    const active = await read(C)
    expectProblem(await h.request('PATCH', `/api/organizations/${C}/activate`), 409, 'already_in_state')
    expect(await read(C)).toEqual(active)
    await setState(C, 'suspend')
    const suspended = await read(C)
    expectProblem(await h.request('PATCH', `/api/organizations/${C}/suspend`), 409, 'already_in_state')
    expect(await read(C)).toEqual(suspended)
  })

  test('the vendor can be neither suspended nor activated: 409', async () => {
    const before = await read(h.vendorId)
    expectProblem(await h.request('PATCH', `/api/organizations/${h.vendorId}/suspend`), 409, 'vendor_always_active')
    expectProblem(await h.request('PATCH', `/api/organizations/${h.vendorId}/activate`), 409, 'vendor_always_active')
    expect(await read(h.vendorId)).toEqual(before)
    expect((await h.request('GET', '/api/organizations')).status).toBe(200)
  })

  test('unknown id 404, malformed id 400; a body is ignored', async () => {
    expectProblem(await h.request('PATCH', `/api/organizations/${crypto.randomUUID()}/suspend`), 404)
    expectProblem(await h.request('PATCH', `/api/organizations/${crypto.randomUUID()}/activate`), 404)
    expectProblem(await h.request('PATCH', '/api/organizations/zzz/suspend'), 400)
    expectProblem(await h.request('PATCH', '/api/organizations/zzz/activate'), 400)
    const C = await h.createCustomer('C')
    const res = await h.request('PATCH', `/api/organizations/${C}/suspend`, { body: { state: 'active', description: 'ignored' } })
    expect(res.status).toBe(200)
    expect(res.body.organization).toMatchObject({ state: 'suspended', description: 'C' })
  })

  test('a body that is not JSON is 400 (after scope and role) and changes nothing', async () => {
    const C = await h.createCustomer('C')
    const P = await h.createPartner(C)
    const before = await read(P)
    for (const action of ['suspend', 'activate']) {
      expectProblem(await h.request('PATCH', `/api/organizations/${P}/${action}`, { body: '{nope' }), 400, 'invalid_json')
      expectProblem(await h.request('PATCH', `/api/organizations/${P}/${action}`, { token: h.token(C, 'viewer'), body: '{nope' }), 403)
      expectProblem(await h.request('PATCH', `/api/organizations/${P}/${action}`, { token: h.token(h.vendorId, 'viewer'), body: '{nope' }), 403)
      const other = await h.createCustomer('Other')
      expectProblem(await h.request('PATCH', `/api/organizations/${P}/${action}`, { token: h.token(other), body: '{nope' }), 404)
    }
    expect(await read(P)).toEqual(before)
  })

  test('two concurrent suspensions: one 200, one 409', async () => {
    const C = await h.createCustomer('C')
    const results = await Promise.all([1, 2].map(() => h.request('PATCH', `/api/organizations/${C}/suspend`)))
    expect(results.map((r) => r.status).sort()).toEqual([200, 409])
    expect((await read(C)).state).toBe('suspended')
  })

  test('concurrent updates each move modified; the last one answered is what is stored', async () => {
    const C = await h.createCustomer('C')
    const results = await Promise.all(['one', 'two', 'three'].map((description) => h.request('PATCH', `/api/organizations/${C}`, { body: { description } })))
    const modified = results.map((r) => r.body.organization.modified as string)
    expect(new Set(modified).size).toBe(3)
    const latest = results.reduce((a, b) => (a.body.organization.modified > b.body.organization.modified ? a : b))
    expect(await read(C)).toMatchObject({ description: latest.body.organization.description, modified: latest.body.organization.modified })
  })

  test('a suspended organization is still read and updated by those in scope', async () => {
    const C = await h.createCustomer('C')
    const P = await h.createPartner(C)
    await setState(P, 'suspend')
    const res = await h.request('GET', `/api/organizations/${P}`, { token: h.token(C, 'viewer') })
    expect(res.status).toBe(200)
    expect(res.body.organization.state).toBe('suspended')
    const update = await h.request('PATCH', `/api/organizations/${P}`, { token: h.token(C), body: { description: 'still mine' } })
    expect(update.status).toBe(200)
    expect(update.body.organization).toMatchObject({ state: 'suspended', description: 'still mine' })
  })
})

describe('POST /api/organizations: a named parent that does not exist', () => {
  // docs/api.md "Status codes and errors": 404 outranks 403 and the body's other faults, also for a record the body names.
  for (const role of ['application_admin', 'viewer'] as Role[]) {
    test(`is 404 for a vendor ${role}, not 403`, async () => {
      const res = await h.request('POST', '/api/organizations', {
        token: h.token(h.vendorId, role),
        body: { description: 'x', parent_id: crypto.randomUUID() },
      })
      expect(res.status).toBe(404)
      expect(res.body.code).toBe('not_found')
    })
  }

  test('a known parent with a role that may not create is 403', async () => {
    const res = await h.request('POST', '/api/organizations', {
      token: h.token(h.vendorId, 'viewer'),
      body: { description: 'x', parent_id: h.vendorId },
    })
    expect(res.status).toBe(403)
  })

  test("is 404 for a partner's admin when the parent is unknown or out of its scope (the vendor, another tenant); itself or its customer: 403", async () => {
    const customer = await h.createCustomer('Parent test')
    const partner = await h.createPartner(customer)
    const other = await h.createCustomer('Other tenant')
    const create = (parent_id: string) => h.request('POST', '/api/organizations', { token: h.token(partner, 'admin'), body: { description: 'x', parent_id } })
    for (const parent of [crypto.randomUUID(), h.vendorId, other]) expectProblem(await create(parent), 404, 'not_found')
    for (const parent of [partner, customer]) expectProblem(await create(parent), 403, 'forbidden')
  })
})

describe('partners per customer (docs/security.md)', () => {
  test(`at most ${MAX_PARTNERS_PER_CUSTOMER}: one more is 409 too_many_partners and creates nothing; the vendor's customers are not bounded`, async () => {
    const customer = await h.createCustomer('Many partners')
    // All but one made directly, as the service makes them (a thousand requests would only be slower).
    await h.storage.transaction(async (tx) => {
      for (let i = 1; i < MAX_PARTNERS_PER_CUSTOMER; i++) {
        await tx.insert('organizations', { organization_id: crypto.randomUUID(), parent_id: customer, organization_type: 'partner', description: `P${i}`, state: 'active', environments: null })
      }
    })
    const create = () => h.request('POST', '/api/organizations', { token: h.token(customer, 'admin'), body: { description: 'One more' } })
    expect((await create()).status).toBe(201)
    const before = (await h.request('GET', '/api/organizations', { token: h.token(customer, 'viewer') })).body.organizations.length
    expectProblem(await create(), 409, 'too_many_partners')
    expectProblem(await h.request('POST', '/api/organizations', { body: { description: 'By the vendor', parent_id: customer } }), 409, 'too_many_partners')
    expect((await h.request('GET', '/api/organizations', { token: h.token(customer, 'viewer') })).body.organizations.length).toBe(before)
    expect((await h.request('POST', '/api/organizations', { body: { description: 'Another customer', parent_id: h.vendorId } })).status).toBe(201)
  })

  test('concurrent creates near the bound never pass it (database mode counted them unlocked: 1,003)', async () => {
    const customer = await h.createCustomer('Racing partners')
    await h.storage.transaction(async (tx) => {
      for (let i = 1; i < MAX_PARTNERS_PER_CUSTOMER; i++) {
        await tx.insert('organizations', { organization_id: crypto.randomUUID(), parent_id: customer, organization_type: 'partner', description: `P${i}`, state: 'active', environments: null })
      }
    })
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => h.request('POST', '/api/organizations', { token: h.token(customer, 'admin'), body: { description: `Racer ${i}` } })))
    expect(answers.map((res) => res.status).sort()).toEqual([201, ...Array(11).fill(409)])
    for (const res of answers) if (res.status === 409) expectProblem(res, 409, 'too_many_partners')
    const listed = (await h.request('GET', '/api/organizations', { token: h.token(customer, 'viewer') })).body.organizations
    expect(listed).toHaveLength(MAX_PARTNERS_PER_CUSTOMER + 1) // and the customer itself
  })
})

test('the service itself refuses a partner as a parent, also when a partner names itself (the route refuses partners first: 403)', async () => {
  const C = await h.createCustomer('C')
  const P = await h.createPartner(C)
  const partner = (await h.storage.find('organizations', P)) as Organization
  const principal = { organization: partner, role: 'admin' as const, customerId: C, tokenId: crypto.randomUUID(), since: 0 }
  const refused = await new OrganizationService(h.storage)
    .create(principal, { description: 'under a partner', parent_id: P }, { cli: 'test' })
    .catch((error) => error)
  expect(refused).toMatchObject({ status: 400, code: 'invalid_parent' })
  expect((await h.request('POST', '/api/organizations', { token: h.token(P), body: { description: 'x', parent_id: P } })).status).toBe(403)
})
