/**
 * Tenant isolation (docs/api.md "Authentication, roles and scope"): two customers, each with a partner and full data. Every
 * id-taking endpoint called with the other tenant's ids, by each of the other tenant's tokens, is
 * 404 exactly like a missing id, and changes nothing (read back with the owner's token, its audit
 * trail included); no list ever shows the other tenant's records or counts them, whatever ids its
 * filters name: tokens and audit events too.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { tokenIdOf, type Role } from '../../src/auth/tokens'
import { PRIMARY_KEY, type TableName } from '../../src/storage/records'
import { createHarness, type ApiResponse, type Harness } from '../support/harness'
import { TEST_STORE } from '../support/database'
import { Table } from '../../src/store/table'
import { populatedTenant, requestOk, p256PublicKey } from '../support/fixtures'

let h: Harness

interface Tenant {
  readonly name: string
  readonly customer: string
  readonly partner: string
  /** PROD only: DEV could be added. */
  readonly app: string
  /** DEV and PROD, no keysets in DEV: DEV could be removed. */
  readonly app2: string
  readonly consumer: string
  readonly installation: string
  /** In app2 PROD, with a keyset. */
  readonly enrollment: string
  /** A token of the customer's, not used to call with: what the token endpoints aim at. */
  readonly tokenId: string
  /** Every token of the tenant: customer and partner, each role. */
  readonly tokens: { label: string; token: string }[]
  /** The owner's view: its admin (who alone reads its tokens). */
  readonly owner: string
}

const ROLES: Role[] = ['admin', 'application_admin', 'viewer']

async function tenant(name: string): Promise<Tenant> {
  const { customer, partner, app, app2, consumer, installation, enrollment } = await populatedTenant(h, name, true)
  // More records, in every state, so lists have something to leak.
  const consumer2 = crypto.randomUUID()
  await requestOk(h, 'POST', '/api/consumers', { consumer_id: consumer2 }, h.token(partner))
  await requestOk(h, 'PATCH', `/api/consumers/${consumer2}/suspend`)
  const installation2 = crypto.randomUUID()
  await requestOk(h, 'POST', '/api/installations', { installation_id: installation2, description: `${name} laptop` }, h.token(customer))
  await requestOk(h, 'PATCH', `/api/installations/${installation2}/verify`)
  await requestOk(h, 'POST', '/api/enrollments', {
    enrollment_id: crypto.randomUUID(),
    consumer_id: consumer,
    installation_id: installation2,
    application_id: app,
    environment: 'PROD',
    installation_description: 'x',
  })
  const tokens = [customer, partner].flatMap((org) =>
    ROLES.map((role) => ({ label: `${org === customer ? 'customer' : 'partner'} ${role}`, token: h.token(org, role) })),
  )
  const tokenId = tokenIdOf(h.token(customer, 'viewer'))!
  return { name, customer, partner, app, app2, consumer, installation, enrollment, tokenId, tokens, owner: h.token(customer, 'admin') }
}

let X: Tenant
let Y: Tenant

beforeAll(async () => {
  h = await createHarness()
  X = await tenant('X')
  Y = await tenant('Y')
})
afterAll(() => h.close())

/** Everything of `t` as its owner sees it: each record, the keysets, environments and every list. */
async function snapshot(t: Tenant) {
  const paths = [
    `/api/applications/${t.app}`,
    `/api/applications/${t.app2}`,
    `/api/environments/${t.app}`,
    `/api/environments/${t.app2}`,
    `/api/consumers/${t.consumer}`,
    `/api/installations/${t.installation}`,
    `/api/enrollments/${t.enrollment}`,
    `/api/enrollments/${t.enrollment}/keysets`,
    '/api/applications',
    '/api/consumers?page_size=1000',
    '/api/installations?page=1&page_size=1000',
    '/api/enrollments?page_size=1000',
    `/api/organizations/${t.customer}`,
    `/api/tokens/${t.tokenId}`,
    '/api/tokens?page_size=1000',
    '/api/audit-events?page_size=1000',
  ]
  const out: Record<string, unknown> = {}
  for (const path of paths) {
    const res = await h.request('GET', path, { token: t.owner })
    expect({ path, status: res.status }).toEqual({ path, status: 200 })
    const { trace_id: _, ...body } = res.body
    out[path] = body
  }
  return out
}

interface Call {
  readonly method: string
  readonly path: string
  readonly body?: unknown
}

/** Every endpoint that takes an identifier, aimed at `t`'s records; `missing` aims at no record. */
function calls(t: Tenant, missing = false): Call[] {
  const id = (real: string) => (missing ? crypto.randomUUID() : real)
  const app = id(t.app)
  const app2 = id(t.app2)
  const consumer = id(t.consumer)
  const installation = id(t.installation)
  const enrollment = id(t.enrollment)
  const customer = id(t.customer)
  const token = id(t.tokenId)
  return [
    { method: 'GET', path: `/api/applications/${app}` },
    { method: 'PATCH', path: `/api/applications/${app}`, body: { description: 'taken over' } },
    { method: 'PATCH', path: `/api/applications/${app}/suspend` },
    { method: 'PATCH', path: `/api/applications/${app}/activate` },
    { method: 'GET', path: `/api/environments/${app}` },
    { method: 'POST', path: `/api/environments/${app}`, body: { environment: 'DEV' } },
    { method: 'DELETE', path: `/api/environments/${app2}`, body: { environment: 'DEV' } },
    { method: 'GET', path: `/api/consumers/${consumer}` },
    { method: 'PATCH', path: `/api/consumers/${consumer}/suspend` },
    { method: 'PATCH', path: `/api/consumers/${consumer}/activate` },
    { method: 'GET', path: `/api/installations/${installation}` },
    { method: 'PATCH', path: `/api/installations/${installation}`, body: { description: 'taken over' } },
    { method: 'PATCH', path: `/api/installations/${installation}/suspend` },
    { method: 'PATCH', path: `/api/installations/${installation}/verify` },
    { method: 'GET', path: `/api/enrollments/${enrollment}` },
    { method: 'PATCH', path: `/api/enrollments/${enrollment}/suspend` },
    { method: 'PATCH', path: `/api/enrollments/${enrollment}/activate` },
    { method: 'GET', path: `/api/enrollments/${enrollment}/keysets` },
    { method: 'POST', path: `/api/enrollments/${enrollment}/keysets`, body: { client_enclave_key: p256PublicKey() } },
    { method: 'GET', path: `/api/tokens/${token}` },
    { method: 'PATCH', path: `/api/tokens/${token}/revoke` },
    // Identifiers in bodies: the records they name are just as out of reach.
    { method: 'POST', path: '/api/applications', body: { organization_id: customer, description: 'planted' } },
    { method: 'POST', path: '/api/consumers', body: { consumer_id: crypto.randomUUID(), organization_id: customer } },
    { method: 'POST', path: '/api/installations', body: { installation_id: crypto.randomUUID(), description: 'planted', organization_id: customer } },
    { method: 'POST', path: '/api/tokens', body: { organization_id: customer, role: 'admin' } },
    {
      method: 'POST',
      path: '/api/enrollments',
      body: {
        enrollment_id: crypto.randomUUID(),
        consumer_id: crypto.randomUUID(),
        installation_id: crypto.randomUUID(),
        application_id: app2,
        environment: 'DEV',
        installation_description: 'planted',
      },
    },
  ]
}

const route = (c: Call) => `${c.method} ${c.path.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, ':id')}`

/** Names the calls before the tenants exist. */
const PLACEHOLDER = (() => {
  const id = '00000000-0000-4000-8000-000000000000'
  return { name: '', customer: id, partner: id, app: id, app2: id, consumer: id, installation: id, enrollment: id, tokenId: id, tokens: [], owner: '' } satisfies Tenant
})()

const NAMED = calls(PLACEHOLDER)

const idsOf = (t: Tenant) => [t.customer, t.partner, t.app, t.app2, t.consumer, t.installation, t.enrollment, t.tokenId]

/**
 * `work`'s result, the primary keys of the records that the storage's reads by id handed out
 * meanwhile, and (embedded) the ids looked up in a table by id alone: a read within a scope looks
 * among the scope's own records, so another tenant's id is never even reached.
 */
async function readsBy<T>(work: () => Promise<T>): Promise<{ result: T; returned: string[]; reached: string[] }> {
  const returned: string[] = []
  const reached: string[] = []
  const { storage } = h
  const note = (table: TableName, found: unknown, records: (found: never) => unknown[]) => {
    const settle = (value: unknown) => {
      if (value !== undefined) for (const record of records(value as never)) if (record !== undefined) returned.push((record as Record<string, string>)[PRIMARY_KEY[table]]!)
      return value
    }
    return found instanceof Promise ? found.then(settle) : settle(found)
  }
  const find = storage.find.bind(storage)
  const findWithParent = storage.findWithParent.bind(storage)
  const findMany = storage.findMany.bind(storage)
  const spies = [
    spyOn(storage, 'find').mockImplementation(((...args: Parameters<typeof find>) => note(args[0], find(...args), (record) => [record])) as never),
    spyOn(storage, 'findWithParent').mockImplementation(((...args: Parameters<typeof findWithParent>) =>
      note(args[0], findWithParent(...args), (found: { record: unknown }) => [found.record])) as never),
    spyOn(storage, 'findMany').mockImplementation(((...args: Parameters<typeof findMany>) => note(args[0], findMany(...args), (records: unknown[]) => records)) as never),
  ]
  const get = Table.prototype.get
  if (TEST_STORE === 'embedded') {
    spies.push(spyOn(Table.prototype, 'get').mockImplementation(function (this: Table<unknown>, id: string) {
      reached.push(id)
      return get.call(this, id)
    }) as never)
  }
  try {
    return { result: await work(), returned, reached }
  } finally {
    for (const spy of spies) spy.mockRestore()
  }
}

const strip = (res: ApiResponse) => ({ status: res.status, body: { ...res.body, trace_id: null } })

for (const [victim, attacker] of [['X', 'Y'], ['Y', 'X']] as const) {
  describe(`${attacker}'s tokens against ${victim}'s records`, () => {
    test('the calls cover every route that takes an identifier (in its path or its POST body)', () => {
      const covered = new Set(calls(X).map(route))
      const idTaking = h.app.routes
        .filter((r) => r.path.startsWith('/api/') && !r.path.startsWith('/api/organizations') && (r.path.includes(':') || r.method === 'POST'))
        .map((r) => `${r.method} ${r.path.replace(/:[a-z_]+/g, ':id')}`)
      expect(idTaking.length).toBeGreaterThan(15)
      expect(idTaking.filter((r) => !covered.has(r))).toEqual([])
    })

    for (let n = 0; n < NAMED.length; n++) {
      test(`${route(NAMED[n]!)}${NAMED[n]!.body ? ' (ids in the body)' : ''}: 404 like a missing id for every token, the record never leaves the storage, and nothing changes`, async () => {
        const v = victim === 'X' ? X : Y
        const a = attacker === 'X' ? X : Y
        const before = await snapshot(v)
        const ownBefore = await snapshot(a)
        for (const { label, token } of a.tokens) {
          const call = calls(v)[n]!
          const { result: res, returned, reached } = await readsBy(() => h.request(call.method, call.path, { token, body: call.body }))
          // Dropped inside the storage, from the same work as a missing id: handed out and then refused, it
          // would cost more than a missing one (in database mode, its row's transfer), a timing oracle;
          // and (embedded) never reached: a hit found and then refused costs more than a miss.
          const victims = (ids: string[]) => ids.filter((id) => idsOf(v).includes(id))
          expect({ label, call: `${call.method} ${call.path}`, victims: victims(returned), reached: victims(reached) }).toEqual({ label, call: `${call.method} ${call.path}`, victims: [], reached: [] })
          expect({ label, call: `${call.method} ${call.path}`, status: res.status }).toEqual({ label, call: `${call.method} ${call.path}`, status: 404 })
          expect(res.headers.get('content-type')).toBe('application/problem+json')
          const ghost = calls(v, true)[n]!
          const missing = await h.request(ghost.method, ghost.path, { token, body: ghost.body })
          expect({ label, ...strip(res) }).toEqual({ label, ...strip(missing) })
        }
        expect(await snapshot(v)).toEqual(before)
        expect(await snapshot(a)).toEqual(ownBefore)
      })
    }

    test("another customer's consumer or installation id: 409 for those who may create, 403 for viewers; nothing changes", async () => {
      const v = victim === 'X' ? X : Y
      const a = attacker === 'X' ? X : Y
      const before = await snapshot(v)
      for (const { label, token } of a.tokens) {
        const want = label.endsWith('viewer') ? 403 : 409
        const consumer = await h.request('POST', '/api/consumers', { token, body: { consumer_id: v.consumer } })
        const installation = await h.request('POST', '/api/installations', { token, body: { installation_id: v.installation, description: 'x' } })
        const enrollment = await h.request('POST', '/api/enrollments', {
          token,
          body: { enrollment_id: crypto.randomUUID(), consumer_id: v.consumer, installation_id: crypto.randomUUID(), application_id: a.app, environment: 'PROD', installation_description: 'x' },
        })
        expect({ label, statuses: [consumer.status, installation.status, enrollment.status] }).toEqual({ label, statuses: [want, want, want] })
      }
      expect(await snapshot(v)).toEqual(before)
    })

    test("another customer's enrollment_id with the attacker's own identifiers: 400, nothing changes", async () => {
      const v = victim === 'X' ? X : Y
      const a = attacker === 'X' ? X : Y
      const before = await snapshot(v)
      const res = await h.request('POST', '/api/enrollments', {
        token: h.token(a.customer),
        body: { enrollment_id: v.enrollment, consumer_id: crypto.randomUUID(), installation_id: crypto.randomUUID(), application_id: a.app, environment: 'PROD', installation_description: 'x' },
      })
      expect(res.status).toBe(400)
      expect(await snapshot(v)).toEqual(before)
    })

    test("no list shows the other tenant's records, whatever its filters name", async () => {
      const v = victim === 'X' ? X : Y
      const a = attacker === 'X' ? X : Y
      const vendorView = await snapshot(v)
      const theirIds = new Set<string>([v.customer, v.partner])
      for (const body of Object.values(vendorView)) {
        for (const match of JSON.stringify(body).matchAll(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g)) theirIds.add(match[0])
      }
      for (const id of [a.app, a.app2, a.consumer, a.installation, a.enrollment]) theirIds.delete(id)
      // Ids both tenants' records hold are no secret of the victim: the vendor's, whose token made them.
      for (const body of Object.values(await snapshot(a))) {
        for (const match of JSON.stringify(body).matchAll(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g)) theirIds.delete(match[0])
      }
      const victimFilter = [
        `organization_ids=${v.customer},${v.partner}`,
        `consumer_ids=${v.consumer}`,
        `installation_ids=${v.installation}`,
        `application_ids=${v.app},${v.app2}`,
        `enrollment_ids=${v.enrollment}`,
      ]
      for (const { label, token } of a.tokens) {
        const lists = ['/api/organizations', '/api/applications', '/api/consumers?page_size=1000', '/api/installations?page_size=1000', '/api/installations?page=1', '/api/enrollments?page_size=1000']
        for (const list of ['/api/consumers', '/api/installations', '/api/enrollments']) {
          for (const filter of victimFilter) lists.push(`${list}?${filter}`, `${list}?page=1&${filter}`)
        }
        // Tokens: a customer's admin reads its own; the audit trail: a customer's admin and viewer.
        const tokenLists = ['/api/tokens?page_size=1000', `/api/tokens?organization_ids=${v.customer},${v.partner}`, `/api/tokens?page=1&organization_ids=${v.customer}&state=active`]
        const eventLists = [
          '/api/audit-events?page_size=1000',
          `/api/audit-events?target_ids=${[v.customer, v.partner, v.app, v.consumer, v.installation, v.enrollment, v.tokenId].join(',')}`,
          `/api/audit-events?customer_ids=${v.customer}`,
          `/api/audit-events?page=1&customer_ids=${v.customer},${a.customer}&actions=consumer.create`,
        ]
        const maySee = (list: string) =>
          list.startsWith('/api/tokens') ? label === 'customer admin' : list.startsWith('/api/audit-events') ? label === 'customer admin' || label === 'customer viewer' : true
        lists.push(...tokenLists, ...eventLists)
        for (const list of lists) {
          const { result: res, returned, reached } = await readsBy(() => h.request('GET', list, { token }))
          const status = maySee(list) ? 200 : 403
          expect({ label, list, status: res.status }).toEqual({ label, list, status })
          // A filter's ids of the victim's records are dropped inside the storage, and never reached, as reads by id are (above).
          const victims = (ids: string[]) => ids.filter((id) => idsOf(v).includes(id))
          expect({ label, list, victims: victims(returned), reached: victims(reached) }).toEqual({ label, list, victims: [], reached: [] })
          const leaked = [...JSON.stringify(res.body).matchAll(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g)]
            .map((m) => m[0])
            .filter((id) => theirIds.has(id))
          expect({ label, list, leaked }).toEqual({ label, list, leaked: [] })
        }
        // The same lists do show the caller's own records (so an empty answer would fail above's twin).
        const own = await h.request('GET', '/api/enrollments?page_size=1000', { token })
        expect(own.body.enrollments.map((e: { enrollment_id: string }) => e.enrollment_id)).toContain(a.enrollment)
        const ownConsumers = await h.request('GET', `/api/consumers?consumer_ids=${a.consumer},${v.consumer}`, { token })
        expect(ownConsumers.body.consumers.map((c: { consumer_id: string }) => c.consumer_id)).toEqual([a.consumer])
        if (maySee('/api/audit-events')) {
          // Filters naming only the victim's records count nothing; the caller's own are there.
          for (const filter of [`target_ids=${v.app},${v.enrollment}`, `customer_ids=${v.customer}`, `actor_token_ids=${tokenIdOf(v.owner)}`]) {
            const res = await h.request('GET', `/api/audit-events?${filter}`, { token })
            expect({ label, filter, total: res.body.total, events: res.body.audit_events.length }).toEqual({ label, filter, total: 0, events: 0 })
          }
          const own = await h.request('GET', `/api/audit-events?target_ids=${a.app},${v.app}`, { token })
          expect(own.body.audit_events.map((e: { target: { id: string } }) => e.target.id)).toEqual([a.app])
        }
        if (maySee('/api/tokens')) {
          const res = await h.request('GET', `/api/tokens?organization_ids=${v.customer},${v.partner}`, { token })
          expect({ label, total: res.body.total }).toEqual({ label, total: 0 })
          const own = await h.request('GET', `/api/tokens?organization_ids=${a.customer},${v.customer}`, { token })
          expect(own.body.tokens.map((t: { token_id: string }) => t.token_id)).toContain(a.tokenId)
          expect(own.body.tokens.every((t: { organization_id: string }) => t.organization_id === a.customer)).toBe(true)
        }
      }
      expect(theirIds.has(v.enrollment) && theirIds.has(v.consumer) && theirIds.has(v.app)).toBe(true)
    })
  })
}
