/**
 * The filtered, paged lists (GET /api/consumers, /api/installations, /api/enrollments) on a data set
 * spanning several pages, each answer compared with the same query computed here from the records
 * as created (read back one by one): paging arithmetic, order, every filter alone and combined
 * (repeated and comma-separated), state and description search, scope, and the 400s.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'
import { requestOk } from '../support/fixtures'

let h: Harness

// ---------------------------------------------------------------------------------------------
// a seeded generator: the data varies with the seed, never with the run

function mulberry32(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const rand = mulberry32(0x6b6579)
const int = (n: number) => Math.floor(rand() * n)
const pick = <T>(items: readonly T[]): T => items[int(items.length)]!
function sample<T>(items: readonly T[], n: number): T[] {
  const copy = [...items]
  for (let i = copy.length - 1; i > 0; i--) {
    const j = int(i + 1)
    ;[copy[i], copy[j]] = [copy[j]!, copy[i]!]
  }
  return copy.slice(0, n)
}

async function inChunks<T>(items: readonly T[], size: number, fn: (item: T) => Promise<void>) {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn))
}

// ---------------------------------------------------------------------------------------------
// the data set

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type View = Record<string, any>
interface Row {
  readonly id: string
  /** The owning customer. */
  readonly org: string
  view: View
}

/** Case, prefixes, infixes and characters that need URL encoding, for the description search. */
const DESCRIPTIONS = ['Pixel 8 of Ann', 'pixel 7a', 'PIXEL tablet', 'Firefox on Pixel 8', 'iPhone 15 Pro', 'Chrome on iPhone', 'Galaxy S24', 'Edge 100% + beta&co']

let A: string, AP: string, B: string, BP: string
const apps: Record<string, { org: string; environments: string[] }> = {}
const consumers = new Map<string, Row>()
const installations = new Map<string, Row>()
const enrollments = new Map<string, Row>()

async function populate() {
  A = await h.createCustomer('A', { default: 'PROD', supported: 'DEV,PROD,TEST' })
  AP = await h.createPartner(A, 'AP')
  B = await h.createCustomer('B')
  BP = await h.createPartner(B, 'BP')
  for (const [org, allowed] of [[A, 'dev,prod'], [A, 'prod,test'], [A, 'dev,prod,test'], [B, undefined], [B, undefined]] as const) {
    const app = await requestOk(h, 'POST', '/api/applications', { organization_id: org, description: 'App', ...(allowed ? { allowed_environments: allowed } : {}) })
    apps[app.application.application_id] = { org, environments: allowed ? allowed.toUpperCase().split(',') : ['PRODUCTION'] }
  }

  // Consumers and installations, some by the partner's token; more come with enrollments below.
  const plan = (org: string, n: number) => Array.from({ length: n }, (_, i) => ({ org, id: crypto.randomUUID(), i }))
  const ownConsumers = [...plan(A, 105), ...plan(B, 12)]
  const ownInstallations = [...plan(A, 112), ...plan(B, 12)]
  await inChunks(ownConsumers, 40, async ({ org, id, i }) => {
    const token = org === A && i % 2 ? h.token(AP, 'application_admin') : h.token(org)
    await requestOk(h, 'POST', '/api/consumers', { consumer_id: id }, token)
    consumers.set(id, { id, org, view: {} })
  })
  await inChunks(ownInstallations, 40, async ({ org, id, i }) => {
    await requestOk(h, 'POST', '/api/installations', { installation_id: id, description: DESCRIPTIONS[(i * 7) % DESCRIPTIONS.length] }, h.token(org))
    installations.set(id, { id, org, view: {} })
  })

  // Enrollments: distinct (consumer, installation, application, environment) tuples; one in ten
  // brings a new consumer or installation with it.
  const tuples = new Set<string>()
  const planned: { org: string; body: View }[] = []
  for (const [org, count] of [[A, 270], [B, 30]] as const) {
    const orgApps = Object.keys(apps).filter((id) => apps[id]!.org === org)
    const cs = [...consumers.values()].filter((c) => c.org === org).map((c) => c.id)
    const is = [...installations.values()].filter((i) => i.org === org).map((i) => i.id)
    while (planned.filter((p) => p.org === org).length < count) {
      const application_id = pick(orgApps)
      const body = {
        enrollment_id: crypto.randomUUID(),
        consumer_id: int(10) === 0 ? crypto.randomUUID() : pick(cs.slice(0, 40)),
        installation_id: int(10) === 0 ? crypto.randomUUID() : pick(is.slice(0, 60)),
        application_id,
        environment: pick(apps[application_id]!.environments).toLowerCase(),
        installation_description: pick(DESCRIPTIONS),
      }
      const tuple = [body.consumer_id, body.installation_id, application_id, body.environment].join('|')
      if (tuples.has(tuple)) continue
      tuples.add(tuple)
      planned.push({ org, body })
    }
  }
  await inChunks(planned, 50, async ({ org, body }) => {
    await requestOk(h, 'POST', '/api/enrollments', body, org === A && int(3) === 0 ? h.token(AP) : undefined)
    enrollments.set(body.enrollment_id, { id: body.enrollment_id, org, view: {} })
    if (!consumers.has(body.consumer_id)) consumers.set(body.consumer_id, { id: body.consumer_id, org, view: {} })
    if (!installations.has(body.installation_id)) installations.set(body.installation_id, { id: body.installation_id, org, view: {} })
  })

  // States: every list has both kinds, installations all three.
  const each = <T>(rows: Map<string, T>, every: number, offset: number) => [...rows.keys()].filter((_, n) => n % every === offset)
  await inChunks(each(consumers, 6, 1), 40, async (id) => void (await requestOk(h, 'PATCH', `/api/consumers/${id}/suspend`)))
  await inChunks(each(installations, 3, 0), 40, async (id) => void (await requestOk(h, 'PATCH', `/api/installations/${id}/verify`)))
  await inChunks(each(installations, 4, 1), 40, async (id) => void (await requestOk(h, 'PATCH', `/api/installations/${id}/suspend`)))
  await inChunks(each(enrollments, 5, 2), 40, async (id) => void (await requestOk(h, 'PATCH', `/api/enrollments/${id}/suspend`)))

  // The records as they are now, read one by one (not through any list).
  for (const [rows, path, key] of [[consumers, 'consumers', 'consumer'], [installations, 'installations', 'installation'], [enrollments, 'enrollments', 'enrollment']] as const) {
    await inChunks([...rows.values()], 50, async (row) => {
      row.view = (await requestOk(h, 'GET', `/api/${path}/${row.id}`))[key]
    })
  }
}

beforeAll(async () => {
  h = await createHarness()
  await populate()
})
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// the independent computation

interface Filters {
  organization_ids?: string[]
  consumer_ids?: string[]
  installation_ids?: string[]
  application_ids?: string[]
  enrollment_ids?: string[]
  state?: string[]
  environment?: string[]
  installation_description?: string
  installation_desc_search_mode?: string
}
const MULTI = ['organization_ids', 'consumer_ids', 'installation_ids', 'application_ids', 'enrollment_ids'] as const
type Multi = (typeof MULTI)[number]

const ENROLLMENT_FIELD: Record<Multi, string> = {
  organization_ids: 'organization_id',
  consumer_ids: 'consumer_id',
  installation_ids: 'installation_id',
  application_ids: 'application_id',
  enrollment_ids: 'enrollment_id',
}

/** Whether some enrollment of the record (on `side`) has one of `values` in the field `kind` names. */
function through(side: 'consumer_id' | 'installation_id', id: string, kind: Multi, values: string[] | undefined): boolean {
  if (!values) return true
  const wanted = values.map((v) => v.toLowerCase())
  for (const e of enrollmentsOf(side, id)) {
    const value = kind === 'organization_ids' ? e.org : e.view[ENROLLMENT_FIELD[kind]]
    if (wanted.includes(value)) return true
  }
  return false
}

const bySide = new Map<string, Row[]>()
/** The enrollments of one consumer or installation (grouped once, after the data set is built). */
function enrollmentsOf(side: 'consumer_id' | 'installation_id', id: string): Row[] {
  if (bySide.size === 0) {
    for (const e of enrollments.values()) {
      for (const key of [`consumer_id|${e.view.consumer_id}`, `installation_id|${e.view.installation_id}`]) bySide.set(key, [...(bySide.get(key) ?? []), e])
    }
  }
  return bySide.get(`${side}|${id}`) ?? []
}

const among = (values: string[] | undefined, value: string) => !values || values.map((v) => v.toLowerCase()).includes(value)

const DESCRIPTION_MATCH: Record<string, (description: string, text: string) => boolean> = {
  exact: (d, t) => d === t,
  contains: (d, t) => d.includes(t),
  startswith: (d, t) => d.startsWith(t),
}

interface ListSpec {
  readonly name: 'consumers' | 'installations' | 'enrollments'
  readonly rows: () => Row[]
  readonly matches: (row: Row, f: Filters) => boolean
  readonly states: readonly string[]
  readonly kinds: readonly (keyof Filters)[]
}

const SPECS: Record<ListSpec['name'], ListSpec> = {
  consumers: {
    name: 'consumers',
    rows: () => [...consumers.values()],
    states: ['active', 'suspended'],
    kinds: [...MULTI, 'state'],
    matches: (c, f) =>
      among(f.organization_ids, c.org) &&
      among(f.consumer_ids, c.id) &&
      through('consumer_id', c.id, 'installation_ids', f.installation_ids) &&
      through('consumer_id', c.id, 'application_ids', f.application_ids) &&
      through('consumer_id', c.id, 'enrollment_ids', f.enrollment_ids) &&
      (!f.state || f.state.includes(c.view.state)),
  },
  installations: {
    name: 'installations',
    rows: () => [...installations.values()],
    states: ['active', 'suspended', 'unregistered', 'verified'],
    kinds: [...MULTI, 'state', 'installation_description'],
    matches: (i, f) =>
      among(f.organization_ids, i.org) &&
      among(f.installation_ids, i.id) &&
      through('installation_id', i.id, 'consumer_ids', f.consumer_ids) &&
      through('installation_id', i.id, 'application_ids', f.application_ids) &&
      through('installation_id', i.id, 'enrollment_ids', f.enrollment_ids) &&
      (!f.state || f.state.some((state) => (state === 'active' ? i.view.state !== 'suspended' : i.view.state === state))) &&
      (f.installation_description === undefined ||
        DESCRIPTION_MATCH[f.installation_desc_search_mode ?? 'exact']!(i.view.description, f.installation_description)),
  },
  enrollments: {
    name: 'enrollments',
    rows: () => [...enrollments.values()],
    states: ['active', 'suspended'],
    kinds: [...MULTI, 'state', 'environment'],
    matches: (e, f) =>
      among(f.organization_ids, e.org) &&
      MULTI.filter((k) => k !== 'organization_ids').every((k) => among(f[k], e.view[ENROLLMENT_FIELD[k]])) &&
      (!f.state || f.state.includes(e.view.state)) &&
      (!f.environment || f.environment.some((environment) => e.view.environment === environment.toUpperCase())),
  },
}

interface Paging {
  page?: number
  page_size?: number
  order?: 'asc' | 'desc'
}

/** What the list must hold: in scope (null: the vendor's), matching, by created then id. */
function expectedRows(spec: ListSpec, scope: string | null, f: Filters, order: 'asc' | 'desc' = 'asc'): View[] {
  const rows = spec.rows().filter((r) => (scope === null || r.org === scope) && spec.matches(r, f))
  rows.sort((a, b) => (a.view.created < b.view.created ? -1 : a.view.created > b.view.created ? 1 : a.id < b.id ? -1 : 1))
  if (order === 'desc') rows.reverse()
  return rows.map((r) => r.view)
}

type Form = 'repeated' | 'comma' | 'mixed' | 'uppercase'

/** The query string, multi-valued parameters written in `form`. */
function query(f: Filters, paging: Paging, form: Form): string {
  const parts: string[] = []
  for (const [key, value] of Object.entries(f)) {
    if (value === undefined) continue
    if (!Array.isArray(value)) {
      parts.push(`${key}=${encodeURIComponent(value)}`)
      continue
    }
    // States are lowercase words: only identifiers and environment names take any case.
    const values = form === 'uppercase' && key !== 'state' ? value.map((v) => v.toUpperCase()) : value
    if (form === 'repeated' || values.length === 1) for (const v of values) parts.push(`${key}=${v}`)
    else if (form === 'comma' || form === 'uppercase') parts.push(`${key}=${values.join(',')}`)
    else parts.push(`${key}=${values[0]}`, `${key}=${values.slice(1).join(',')}`)
  }
  for (const [key, value] of Object.entries(paging)) if (value !== undefined) parts.push(`${key}=${value}`)
  return parts.length ? `?${parts.join('&')}` : ''
}

const scopes = () => [
  { label: 'vendor', token: h.vendorToken, scope: null as string | null },
  { label: 'customer A', token: h.token(A), scope: A },
  { label: 'partner of A (viewer)', token: h.token(AP, 'viewer'), scope: A },
  { label: 'customer B (viewer)', token: h.token(B, 'viewer'), scope: B },
  { label: 'partner of B', token: h.token(BP, 'application_admin'), scope: B },
]

/** Calls the list and compares it, shape included, with the computed answer. Returns the total. */
async function check(spec: ListSpec, token: string, scope: string | null, f: Filters, paging: Paging = {}, form: Form = 'repeated') {
  const path = `/api/${spec.name}${query(f, paging, form)}`
  const res = await h.request('GET', path, { token })
  expect({ path, status: res.status }).toEqual({ path, status: 200 })
  const all = expectedRows(spec, scope, f, paging.order)
  const size = paging.page_size ?? 100
  const page = paging.page ?? 1
  const slice = all.slice((page - 1) * size, page * size)
  if (spec.name === 'installations' && paging.page === undefined) {
    expect({ path, body: res.body }).toEqual({ path, body: { installations: slice, trace_id: res.headers.get('x-trace-id') } })
  } else {
    const want = { [spec.name]: slice, total: all.length, ...(paging.page !== undefined ? { page } : {}), page_size: size }
    expect({ path, body: res.body }).toEqual({ path, body: want })
  }
  return all.length
}

async function expect400(path: string, token = h.vendorToken) {
  const res = await h.request('GET', path, { token })
  expect({ path, status: res.status }).toEqual({ path, status: 400 })
  expect(res.headers.get('content-type')).toBe('application/problem+json')
}

const idsOf = (rows: Map<string, Row>, org: string) => [...rows.values()].filter((r) => r.org === org).map((r) => r.id)

// ---------------------------------------------------------------------------------------------

test('the data set spans several pages of every list, in both customers', () => {
  expect(idsOf(consumers, A).length).toBeGreaterThan(100)
  expect(idsOf(installations, A).length).toBeGreaterThan(100)
  expect(idsOf(enrollments, A).length).toBeGreaterThan(250)
  for (const rows of [consumers, installations, enrollments]) expect(idsOf(rows, B).length).toBeGreaterThan(0)
  const states = (rows: Map<string, Row>) => new Set([...rows.values()].map((r) => r.view.state))
  expect([...states(consumers)].sort()).toEqual(['active', 'suspended'])
  expect([...states(installations)].sort()).toEqual(['suspended', 'unregistered', 'verified'])
  expect([...states(enrollments)].sort()).toEqual(['active', 'suspended'])
})

for (const spec of Object.values(SPECS)) {
  describe(`GET /api/${spec.name}`, () => {
    test('scope: each token sees exactly its customer\'s records (the vendor all), in creation order', async () => {
      for (const { token, scope } of scopes()) {
        await check(spec, token, scope, {}, { page_size: 1000 })
        await check(spec, token, scope, {}, { page: 1, page_size: 1000 })
      }
    })

    test('without page: the first page_size records, page_size 100 by default', async () => {
      for (const { token, scope } of scopes()) {
        await check(spec, token, scope, {})
        await check(spec, token, scope, {}, { page_size: 7 })
        await check(spec, token, scope, {}, { page_size: 1, order: 'desc' })
      }
    })

    test('paging: every page in turn, the last partial, past the end empty; asc and desc', async () => {
      for (const order of ['asc', 'desc'] as const) {
        for (const { token, scope } of [scopes()[0]!, scopes()[1]!]) {
          for (const size of [7, 100]) {
            const total = expectedRows(spec, scope, {}).length
            const pages = Math.ceil(total / size)
            const seen: string[] = []
            for (let page = 1; page <= pages + 1; page++) {
              const res = await h.request('GET', `/api/${spec.name}?page=${page}&page_size=${size}&order=${order}`, { token })
              expect(res.status).toBe(200)
              expect(res.body.total).toBe(total)
              expect(res.body.page).toBe(page)
              expect(res.body[spec.name].length).toBe(page < pages ? size : page === pages ? total - size * (pages - 1) : 0)
              seen.push(...res.body[spec.name].map((r: View) => JSON.stringify(r)))
            }
            // Every record exactly once, in the computed order.
            expect(seen).toEqual(expectedRows(spec, scope, {}, order).map((r) => JSON.stringify(r)))
          }
        }
      }
      await check(spec, h.vendorToken, null, {}, { page: 1_000_000, page_size: 1000 })
      // Any page a client can count to is served, however far past the end (docs/api.md, "Lists and paging").
      for (const page of [1_000_000_000, 99_999_999_999, Number.MAX_SAFE_INTEGER]) {
        for (const order of ['asc', 'desc'] as const) {
          await check(spec, h.vendorToken, null, {}, { page, page_size: 1000, order })
          await check(spec, h.token(A), A, { state: ['suspended'] }, { page, page_size: 1000, order })
        }
      }
    })

    test('desc is asc reversed; page_size 1 and 1000 are the bounds', async () => {
      const asc = expectedRows(spec, null, {}, 'asc')
      const desc = expectedRows(spec, null, {}, 'desc')
      expect(desc).toEqual([...asc].reverse())
      await check(spec, h.vendorToken, null, {}, { order: 'desc', page_size: 1000 })
      await check(spec, h.vendorToken, null, {}, { order: 'asc', page: 3, page_size: 1 })
      await check(spec, h.vendorToken, null, {}, { order: 'desc', page: 2, page_size: 1 })
    })

    test('bad paging and order: 400', async () => {
      for (const bad of ['page=0', 'page=-1', 'page=x', 'page=', 'page=1.5', 'page=1e2', 'page_size=0', 'page_size=1001', 'page_size=-5', 'page_size=ten', 'page_size=', 'order=up', 'order=', 'order=ASC', 'order=asc,desc', 'page=1&page=2', `page=${Number.MAX_SAFE_INTEGER + 1}`, `page=${'9'.repeat(400)}`]) {
        await expect400(`/api/${spec.name}?${bad}`)
      }
    })

    test('bad filter values: malformed ids and unknown states are 400', async () => {
      const known = idsOf(spec.name === 'consumers' ? consumers : spec.name === 'installations' ? installations : enrollments, A)[0]!
      for (const kind of MULTI) {
        for (const bad of ['abc', `${known},abc`, `${known}x`, '12345678-1234-1234-1234-1234567890ab0']) await expect400(`/api/${spec.name}?${kind}=${bad}`, h.token(A))
        await expect400(`/api/${spec.name}?${kind}=${known}&${kind}=nope`, h.token(A))
      }
      for (const bad of ['deleted', 'ACTIVE', 'all', 'active,nope', ...(spec.name === 'installations' ? [] : ['verified', 'unregistered'])]) {
        await expect400(`/api/${spec.name}?state=${bad}`)
      }
      // The message names the values a state may take.
      const res = await h.request('GET', `/api/${spec.name}?state=nope`, { token: h.vendorToken })
      expect(res.body.detail).toBe(`query.state.0: state must be ${spec.states.slice(0, -1).join(', ')} or ${spec.states.at(-1)}`)
    })

    test('each filter alone, repeated and comma-separated alike', async () => {
      const pools = poolsFor(spec)
      for (const kind of spec.kinds) {
        for (const f of singleFilters(spec, kind, pools)) {
          for (const { token, scope } of [scopes()[0]!, scopes()[1]!]) {
            const totals = new Set<number>()
            for (const form of ['repeated', 'comma', 'mixed', 'uppercase'] as const) totals.add(await check(spec, token, scope, f, { page_size: 1000 }, form))
            expect(totals.size).toBe(1)
          }
        }
      }
    })

    test("another tenant's ids simply match nothing", async () => {
      const pools = poolsFor(spec)
      for (const kind of MULTI) {
        const ofB = kind === 'organization_ids' ? [B, BP] : pools[kind].filter((id) => owner(kind, id) === B)
        expect(ofB.length).toBeGreaterThan(0)
        const res = await h.request('GET', `/api/${spec.name}?page=1&${kind}=${ofB.join(',')}`, { token: h.token(A) })
        expect(res.status).toBe(200)
        expect(res.body).toMatchObject({ [spec.name]: [], total: 0 })
        // Mixed with the caller's own: only its own match.
        const ofA = kind === 'organization_ids' ? [A] : pools[kind].filter((id) => owner(kind, id) === A).slice(0, 3)
        const total = await check(spec, h.token(A), A, { [kind]: [...ofB, ...ofA] }, { page: 1, page_size: 1000 })
        expect(total).toBeGreaterThan(0)
        // For the vendor they are ordinary ids.
        expect(await check(spec, h.vendorToken, null, { [kind]: ofB }, { page: 1, page_size: 1000 })).toBeGreaterThan(0)
      }
    })

    test('filters combined: AND across parameters, OR within one (random combinations)', async () => {
      const pools = poolsFor(spec)
      let nonEmpty = 0
      for (let round = 0; round < 60; round++) {
        const kinds = sample(spec.kinds, 2 + int(3))
        const f: Filters = {}
        // Half the rounds around one enrollment (so the values are related and often match), half at random.
        const seed = int(2) ? pick([...enrollments.values()]) : undefined
        for (const kind of kinds) Object.assign(f, seed ? aroundEnrollment(kind, seed, pools) : pick(singleFilters(spec, kind, pools)))
        const { token, scope } = pick(scopes().filter((s) => !seed || int(4) === 0 || s.scope === null || s.scope === seed.org))
        const paging: Paging = { order: pick(['asc', 'desc'] as const), page_size: pick([1, 3, 10, 100]), ...(int(2) ? { page: 1 + int(3) } : {}) }
        const total = await check(spec, token, scope, f, paging, pick(['repeated', 'comma', 'mixed', 'uppercase'] as const))
        if (total > 0) nonEmpty++
      }
      // The combinations must exercise matches, not only empty answers.
      expect(nonEmpty).toBeGreaterThan(15)
    })
  })
}

// ---------------------------------------------------------------------------------------------
// list-specific parameters

describe('GET /api/installations: state and description search', () => {
  test('state: active = unregistered or verified; suspended; unregistered and verified alone', async () => {
    const spec = SPECS.installations
    const totals: Record<string, number> = {}
    for (const state of spec.states) totals[state] = await check(spec, h.token(A), A, { state: [state] }, { page: 1, page_size: 1000 })
    expect(totals.active).toBe(totals.unregistered! + totals.verified!)
    expect(totals.active! + totals.suspended!).toBe(idsOf(installations, A).length)
    for (const state of spec.states) expect(totals[state]).toBeGreaterThan(0)
    // Several values are alternatives (docs/api.md "Endpoints"); `active` and `verified` overlap and count once.
    expect(await check(spec, h.token(A), A, { state: ['active', 'verified'] }, { page: 1, page_size: 1000 }, 'comma')).toBe(totals.active!)
    expect(await check(spec, h.token(A), A, { state: ['suspended', 'unregistered'] }, { page: 1, page_size: 1000 }, 'repeated')).toBe(
      totals.suspended! + totals.unregistered!,
    )
  })

  test('installation_description: exact (the default), contains, startswith; case-sensitive; URL-encoded text', async () => {
    const spec = SPECS.installations
    const cases: [string, string | undefined][] = [
      ['Pixel 8 of Ann', undefined],
      ['Pixel 8 of Ann', 'exact'],
      ['pixel 8 of ann', 'exact'],
      ['Pixel', 'exact'],
      ['Pixel', 'contains'],
      ['pixel', 'contains'],
      ['PIXEL', 'contains'],
      ['Pixel', 'startswith'],
      ['pixel', 'startswith'],
      ['on ', 'contains'],
      ['iPhone', 'startswith'],
      ['iPhone', 'contains'],
      ['100% + beta&co', 'contains'],
      ['Edge 100% + beta&co', 'exact'],
      ['Edge 100%', 'startswith'],
      ['8', 'contains'],
    ]
    for (const [text, mode] of cases) {
      const f: Filters = { installation_description: text, ...(mode ? { installation_desc_search_mode: mode } : {}) }
      for (const { token, scope } of [scopes()[0]!, scopes()[1]!]) {
        await check(spec, token, scope, f, { page_size: 1000 })
        await check(spec, token, scope, f, { page: 1, page_size: 1000 })
      }
    }
    // The search really discriminates: exact, startswith and contains differ on this data.
    const count = (text: string, mode: string) => expectedRows(spec, A, { installation_description: text, installation_desc_search_mode: mode }).length
    expect(count('Pixel', 'exact')).toBe(0)
    expect(count('Pixel', 'startswith')).toBeGreaterThan(0)
    expect(count('Pixel', 'contains')).toBeGreaterThan(count('Pixel', 'startswith'))
    expect(count('pixel', 'startswith')).toBeGreaterThan(0)
  })

  test('an unknown search mode is 400', async () => {
    for (const mode of ['regex', 'EXACT', 'Contains', '', 'starts_with']) {
      await expect400(`/api/installations?installation_description=Pixel&installation_desc_search_mode=${mode}`)
    }
  })

  test('more than 100 matches without page: at most page_size, default 100, unpaged shape', async () => {
    const all = expectedRows(SPECS.installations, A, {})
    expect(all.length).toBeGreaterThan(100)
    const res = await h.request('GET', '/api/installations', { token: h.token(A) })
    expect(Object.keys(res.body).sort()).toEqual(['installations', 'trace_id'])
    expect(res.body.installations).toEqual(all.slice(0, 100))
  })
})

describe('GET /api/enrollments: environment', () => {
  test('environment filter, any case; one the data lacks matches nothing; a bad name is 400', async () => {
    const spec = SPECS.enrollments
    for (const environment of ['DEV', 'prod', 'Test', 'PRODUCTION', 'QA']) {
      for (const { token, scope } of scopes()) await check(spec, token, scope, { environment: [environment] }, { page: 1, page_size: 1000 })
    }
    const dev = expectedRows(spec, A, { environment: ['DEV'] }).length
    const test = expectedRows(spec, A, { environment: ['TEST'] }).length
    expect(dev).toBeGreaterThan(0)
    expect(test).toBeGreaterThan(0)
    // Several names are alternatives, repeated or comma-separated, any case; blanks are ignored.
    for (const form of ['repeated', 'comma', 'mixed'] as const) {
      expect(await check(spec, h.token(A), A, { environment: ['dev', 'TEST', 'Dev'] }, { page: 1, page_size: 1000 }, form)).toBe(dev + test)
    }
    expect(await check(spec, h.token(A), A, { environment: ['', 'DEV'] }, { page: 1, page_size: 1000 }, 'comma')).toBe(dev)
    for (const bad of ['bad%20name', 'x'.repeat(33), 'a!b', 'DEV,a!b']) await expect400(`/api/enrollments?environment=${bad}`)
  })
})

// ---------------------------------------------------------------------------------------------
// value pools for the filters

function owner(kind: Multi, id: string): string | undefined {
  if (kind === 'organization_ids') return id
  if (kind === 'application_ids') return apps[id]?.org
  const rows = kind === 'consumer_ids' ? consumers : kind === 'installation_ids' ? installations : enrollments
  return rows.get(id)?.org
}

function poolsFor(_spec: ListSpec): Record<Multi, string[]> {
  return {
    organization_ids: [A, B, AP],
    consumer_ids: [...consumers.keys()],
    installation_ids: [...installations.keys()],
    application_ids: Object.keys(apps),
    enrollment_ids: [...enrollments.keys()],
  }
}

/** A few single-parameter filters of `kind`: one value, several (mostly A's, some B's), unknown ids. */
function singleFilters(spec: ListSpec, kind: keyof Filters, pools: Record<Multi, string[]>): Filters[] {
  if (kind === 'state') return [...spec.states.map((state) => ({ state: [state] })), { state: [...spec.states] }, { state: spec.states.slice(-2) }]
  if (kind === 'environment') return [['DEV'], ['prod'], ['PRODUCTION'], ['dev', 'PRODUCTION'], ['Test', 'QA']].map((environment) => ({ environment }))
  if (kind === 'installation_description') {
    return [
      { installation_description: 'Pixel', installation_desc_search_mode: 'contains' },
      { installation_description: 'Galaxy S24' },
      { installation_description: 'Chrome', installation_desc_search_mode: 'startswith' },
    ]
  }
  const pool = pools[kind as Multi]
  const ofA = pool.filter((id) => owner(kind as Multi, id) === A)
  const ofB = pool.filter((id) => owner(kind as Multi, id) === B)
  if (kind === 'organization_ids') return [{ organization_ids: [A] }, { organization_ids: [B] }, { organization_ids: [A, B] }, { organization_ids: [AP] }, { organization_ids: [A, crypto.randomUUID()] }]
  return [
    { [kind]: sample(ofA, 1) },
    { [kind]: sample(ofA, 4) },
    { [kind]: [...sample(ofA, 3), ...sample(ofB, 2)] },
    { [kind]: [...sample(ofA, 2), ...sample(ofA, 1)].concat(crypto.randomUUID()) },
    { [kind]: [crypto.randomUUID()] },
  ]
}

/** A filter of `kind` whose values include those of `seed` (an enrollment), plus a few others. */
function aroundEnrollment(kind: keyof Filters, seed: Row, pools: Record<Multi, string[]>): Filters {
  const e = seed.view
  const installation = installations.get(e.installation_id)!.view
  switch (kind) {
    case 'state':
      return { state: int(2) ? [pick(['active', 'suspended'])] : ['active', 'suspended'] }
    case 'environment':
      return { environment: [int(2) ? e.environment : e.environment.toLowerCase(), ...(int(2) ? ['QA'] : [])] }
    case 'installation_description': {
      const text: string = installation.description
      const mode = pick(['exact', 'contains', 'startswith'])
      const cut = 1 + int(text.length - 1)
      return { installation_description: mode === 'exact' ? text : mode === 'startswith' ? text.slice(0, cut) : text.slice(int(cut), cut + 1), installation_desc_search_mode: mode }
    }
    default: {
      const own = kind === 'organization_ids' ? seed.org : e[ENROLLMENT_FIELD[kind as Multi]]
      return { [kind]: sample([own, ...sample(pools[kind as Multi], int(3))], 4) }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// the storage's alternatives: conditions of which one must hold (on both stores)

describe('storage list: anyOf alternatives (docs/storage.md "Lists")', () => {
  test('installations and audit events: each answer is the records for which one alternative holds, in order, paged, counted', async () => {
    const all = await h.storage.list({ table: 'installations', scope: A, where: [], order: 'asc' })
    const middle = all.items[Math.floor(all.items.length / 2)]!.created
    const alternatives = [
      [{ field: 'state' as const, in: ['suspended'] }, { field: 'description' as const, match: 'contains' as const, text: 'Pixel' }],
      [{ field: 'created' as const, from: middle }, { field: 'state' as const, in: ['verified'] }],
      [{ field: 'description' as const, match: 'exact' as const, text: 'Galaxy S24' }],
    ]
    const holds = (r: (typeof all.items)[number]) =>
      (r.state === 'suspended' && r.description.includes('Pixel')) || (r.created >= middle && r.state === 'verified') || r.description === 'Galaxy S24'
    const want = all.items.filter(holds).map((r) => r.installation_id)
    expect(want.length).toBeGreaterThan(20)
    expect(want.length).toBeLessThan(all.items.length)
    for (const order of ['asc', 'desc'] as const) {
      const ordered = order === 'asc' ? want : [...want].reverse()
      for (const page of [1, 2, 3]) {
        const got = await h.storage.list({ table: 'installations', scope: A, where: [{ anyOf: alternatives }], page: { number: page, size: 10 }, order })
        expect({ order, page, total: got.total, ids: got.items.map((r) => r.installation_id) }).toEqual({ order, page, total: want.length, ids: ordered.slice((page - 1) * 10, page * 10) })
      }
    }
    expect((await h.storage.list({ table: 'installations', scope: A, where: [{ anyOf: [] }], order: 'asc' })).items).toEqual([])
    expect((await h.storage.list({ table: 'installations', scope: A, where: [{ anyOf: [[]] }], order: 'asc' })).total).toBe(all.total)

    const events = await h.storage.list({ table: 'audit_events', where: [{ field: 'customer_id', in: [A] }], order: 'asc' })
    const late = events.items[Math.floor(events.items.length * 0.8)]!.created
    const eventAlternatives = [[{ field: 'action' as const, in: ['installation.suspend'] }], [{ field: 'action' as const, in: ['consumer.create'] }, { field: 'created' as const, from: late }]]
    const wantEvents = events.items.filter((e) => e.action === 'installation.suspend' || (e.action === 'consumer.create' && e.created >= late)).map((e) => e.event_id)
    expect(wantEvents.length).toBeGreaterThan(10)
    const gotEvents = await h.storage.list({ table: 'audit_events', where: [{ field: 'customer_id', in: [A] }, { anyOf: eventAlternatives }], order: 'asc' })
    expect({ total: gotEvents.total, ids: gotEvents.items.map((e) => e.event_id) }).toEqual({ total: wantEvents.length, ids: wantEvents })
  })
})
