/** The list steps: filters and paging; where the client knows every record that can match, the exact answer. */
import type { LoadClient } from './client'
import { leak, wrong, type Body, type InstallationState, type Problem, type Step } from './model'

/** Checks that every list answer passes (an array no longer than the page), then `extra`. */
function listCheck(field: string, q: URLSearchParams, extra?: (items: Body[], body: Body) => Problem | null): (body: Body) => Problem | null {
  return (body) => {
    const items = body[field]
    if (!Array.isArray(items)) return wrong(`no ${field} array`)
    const pageSize = q.has('page_size') ? Number(q.get('page_size')) : 100
    if (items.length > pageSize) return wrong(`${items.length} items, page_size ${pageSize}`)
    return extra?.(items, body) ?? null
  }
}

function addPaging(c: LoadClient, q: URLSearchParams): void {
  if (c.random.chance(0.5)) q.set('page', String(c.random.int(1, 4)))
  if (c.random.chance(0.7)) q.set('page_size', String(c.random.int(1, 40)))
  if (c.random.chance(0.3)) q.set('order', c.random.pick(['asc', 'desc']))
}

/** total/page/page_size as the consumer and enrollment lists answer them. */
function pagedShape(q: URLSearchParams, items: Body[], body: Body): Problem | null {
  if (!Number.isInteger(body.total) || body.total < items.length) return wrong(`total ${body.total} with ${items.length} items`)
  if (q.has('page') ? body.page !== Number(q.get('page')) : 'page' in body) return wrong(`page ${body.page}, sent ${q.get('page')}`)
  if (body.page_size !== (q.has('page_size') ? Number(q.get('page_size')) : 100)) return wrong(`page_size ${body.page_size}`)
  return null
}

/** An unexpected answer left one of the client's records unknown: no exact list then. */
function hasUncertainRecords(c: LoadClient): boolean {
  return [...c.consumers.keys(), ...c.installations.keys(), ...c.enrollments.keys()].some((id) => c.run.uncertain.has(id))
}

/** Every id in the client's tenant's list is the tenant's. */
function ownedByTenant(c: LoadClient, ids: string[], list: string): Problem | null {
  return c.run.checkOwned(c.tenant.index, ids, `${list} list of tenant ${c.tenant.index}`)
}

export function listConsumers(c: LoadClient): Step {
  const role = c.tenantReader()
  const q = new URLSearchParams()
  const byApp = c.random.chance(0.4)
  if (byApp) q.set('application_ids', c.app.id)
  if (c.random.chance(0.3)) q.set('organization_ids', c.customerId)
  if (c.random.chance(0.3)) q.set('state', c.random.pick(['active', 'suspended']))
  const exact = byApp && q.size <= 2 && !hasUncertainRecords(c)
  if (!exact) addPaging(c, q)
  // Exactly the consumers of this client's enrollments in its own application (nobody else enrolls there).
  const expected = new Set([...c.enrollments.values()].filter((e) => e.app === c.app).map((e) => e.consumer))
  return {
    kind: 'GET /api/consumers',
    scenario: 'normal',
    role,
    method: 'GET',
    path: `/api/consumers?${q}`,
    expect: 200,
    check: listCheck('consumers', q, (items, body) => {
      const leaked = ownedByTenant(c, items.map((r) => r.consumer_id), 'consumer')
      if (leaked) return leaked
      if (q.has('state') && items.some((r) => r.state !== q.get('state'))) return wrong(`a consumer not ${q.get('state')}`)
      if (exact) {
        const want = q.has('state') ? [...expected].filter((id) => c.consumers.get(id)?.state === q.get('state')) : [...expected]
        const got = items.map((r) => r.consumer_id as string)
        if (got.length !== want.length || !got.every((id) => expected.has(id)) || body.total !== want.length) {
          return wrong(`consumers of application ${c.app.id}: ${got.length} (total ${body.total}), expected ${want.length}`)
        }
      }
      return pagedShape(q, items, body)
    }),
  }
}

export function listInstallations(c: LoadClient): Step {
  const role = c.tenantReader()
  const q = new URLSearchParams()
  const mine = c.random.chance(0.5)
  if (mine) {
    q.set('installation_description', c.prefix)
    q.set('installation_desc_search_mode', 'startswith')
  }
  const state = c.random.chance(0.3) ? c.random.pick(['active', 'suspended', 'unregistered', 'verified']) : null
  if (state) q.set('state', state)
  const exact = mine && !hasUncertainRecords(c) && c.random.chance(0.6)
  if (!exact) {
    if (c.random.chance(0.2)) {
      const consumer = c.pickKey(c.consumers)
      if (consumer) q.set('consumer_ids', consumer)
    }
    addPaging(c, q)
  }
  // The `active` filter means "not suspended".
  const matches = (s: InstallationState) => !state || (state === 'active' ? s !== 'suspended' : s === state)
  const paged = q.has('page')
  return {
    kind: 'GET /api/installations',
    scenario: 'normal',
    role,
    method: 'GET',
    path: `/api/installations?${q}`,
    expect: 200,
    check: listCheck('installations', q, (items, body) => {
      const leaked = ownedByTenant(c, items.map((r) => r.installation_id), 'installation')
      if (leaked) return leaked
      if (items.some((r) => !matches(r.state))) return wrong(`an installation not ${state}`)
      if (mine && items.some((r) => !String(r.description).startsWith(c.prefix))) return wrong(`a description not starting with "${c.prefix}"`)
      // Unlike the consumer and enrollment lists, total and page only when a page is asked for.
      if (paged) {
        if (!Number.isInteger(body.total) || body.total < items.length || body.page !== Number(q.get('page'))) return wrong('paged shape')
      } else if ('total' in body || typeof body.trace_id !== 'string') return wrong('unpaged shape')
      if (exact) {
        const want = [...c.installations].filter(([, m]) => matches(m.state))
        const byId = new Map(items.map((r) => [r.installation_id as string, r]))
        if (byId.size !== want.length) return wrong(`${byId.size} of this client's installations, expected ${want.length}`)
        for (const [id, m] of want) {
          const r = byId.get(id)
          if (!r || r.state !== m.state || r.description !== m.description) return wrong(`installation ${id}: expected ${m.state} "${m.description}"`)
        }
      }
      return null
    }),
  }
}

export function listEnrollments(c: LoadClient): Step {
  const role = c.tenantReader()
  const q = new URLSearchParams()
  const byApp = c.random.chance(0.5)
  if (byApp) q.set('application_ids', c.app.id)
  const environment = c.random.chance(0.3) ? c.random.pick(c.appEnvironments) : null
  if (environment) q.set('environment', environment)
  const state = c.random.chance(0.3) ? c.random.pick(['active', 'suspended'] as const) : null
  if (state) q.set('state', state)
  const exact = byApp && !hasUncertainRecords(c) && c.random.chance(0.6)
  if (!exact) addPaging(c, q)
  return {
    kind: 'GET /api/enrollments',
    scenario: 'normal',
    role,
    method: 'GET',
    path: `/api/enrollments?${q}`,
    expect: 200,
    check: listCheck('enrollments', q, (items, body) => {
      const leaked =
        ownedByTenant(c, items.map((r) => r.enrollment_id), 'enrollment') ??
        ownedByTenant(c, items.flatMap((r) => [r.application_id, r.consumer_id, r.installation_id]), 'enrollment')
      if (leaked) return leaked
      if (environment && items.some((r) => r.environment !== environment)) return wrong(`an enrollment not in ${environment}`)
      if (state && items.some((r) => r.state !== state)) return wrong(`an enrollment not ${state}`)
      if (byApp && items.some((r) => r.application_id !== c.app.id)) return wrong('an enrollment of another application')
      if (exact) {
        const want = [...c.enrollments.values()].filter((e) => e.app === c.app && (!environment || e.environment === environment) && (!state || e.state === state))
        const byId = new Map(items.map((r) => [r.enrollment_id as string, r]))
        if (byId.size !== want.length || body.total !== want.length) return wrong(`${byId.size} (total ${body.total}) of this client's enrollments, expected ${want.length}`)
        for (const m of want) {
          const r = byId.get(m.id)
          if (!r || r.state !== m.state || r.active_keyset_id !== (m.keysets[m.keysets.length - 1] ?? null)) return wrong(`enrollment ${m.id}: expected ${m.state}`)
        }
      }
      return pagedShape(q, items, body)
    }),
  }
}

/** A list filtered by another tenant's ids: 200 and nothing. */
export function listWithOtherTenantIds(c: LoadClient): Step | null {
  const other = c.run.otherTenant(c.tenant, c.random)
  const client = c.someClient(other)
  const list = c.random.pick(['consumers', 'installations', 'enrollments'] as const)
  const filter = c.random.pick(['organization_ids', 'consumer_ids', 'installation_ids', 'application_ids', 'enrollment_ids'] as const)
  const id =
    filter === 'organization_ids' ? other.customerId
    : filter === 'consumer_ids' ? client.pickKey(client.consumers)
    : filter === 'installation_ids' ? client.pickKey(client.installations)
    : filter === 'application_ids' ? client.app.id
    : client.pickKey(client.enrollments)
  if (!id) return null
  const q = new URLSearchParams({ [filter]: id })
  // Sometimes beside one of this tenant's own ids: the other tenant's still matches nothing.
  if (c.random.chance(0.3) && filter === 'application_ids') q.append('application_ids', c.app.id)
  const alone = q.getAll(filter).length === 1
  if (c.random.chance(0.5)) q.set('page', '1')
  return {
    kind: `GET /api/${list}`,
    scenario: 'cross-tenant',
    role: c.tenantReader(),
    method: 'GET',
    path: `/api/${list}?${q}`,
    expect: 200,
    check: (body) => {
      const items = body[list]
      if (!Array.isArray(items)) return wrong(`no ${list} array`)
      const ids = items.map((r: Body) => r[`${list.slice(0, -1)}_id`] as string)
      const leaked = c.run.checkOwned(c.tenant.index, ids, `${list} list of tenant ${c.tenant.index} filtered by tenant ${other.index}'s ${filter}`)
      if (leaked) return leaked
      if (alone && items.length > 0) return leak(`${items.length} records for another tenant's ${filter}`)
      if (alone && 'total' in body && body.total !== 0) return leak(`total ${body.total} for another tenant's ${filter}`)
      return null
    },
  }
}

export function listOrganizations(c: LoadClient): Step {
  const role = c.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor_viewer'] as const)
  const mine = [c.customerId, c.tenant.partnerId, c.tenant.togglePartnerId]
  return {
    kind: 'GET /api/organizations',
    scenario: 'normal',
    role,
    method: 'GET',
    path: '/api/organizations',
    expect: 200,
    check: (body) => {
      const ids = (body.organizations as Body[]).map((o) => o.organization_id as string)
      if (role === 'vendor_viewer') {
        return c.run.tenants.every((t) => ids.includes(t.customerId)) && ids.includes(c.run.vendorId) ? null : wrong('the vendor misses organizations')
      }
      if (role === 'partner') return ids.length === 1 && ids[0] === c.tenant.partnerId ? null : leak(`a partner sees ${ids.length} organizations`)
      const leaked = ownedByTenant(c, ids, 'organization')
      if (leaked) return leaked
      return mine.every((id) => ids.includes(id)) ? null : wrong('the customer misses its own organizations')
    },
  }
}

export function listApplications(c: LoadClient): Step {
  const role = c.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor'] as const)
  return {
    kind: 'GET /api/applications',
    scenario: 'normal',
    role,
    method: 'GET',
    path: '/api/applications',
    expect: 200,
    check: (body) => {
      const apps = body.applications as Body[]
      const ids = apps.map((a) => a.application_id as string)
      if (!c.knownApps().every((a) => ids.includes(a.id))) return wrong("the list misses this client's applications")
      if (role === 'vendor') return null
      return ownedByTenant(c, ids, 'application') ?? (apps.some((a) => a.organization_id !== c.customerId) ? leak('an application of another customer') : null)
    },
  }
}

/** The vendor lists one customer's records: all of them that customer's. */
export function vendorList(c: LoadClient): Step {
  const tenant = c.random.pick(c.run.tenants)
  const list = c.random.pick(['consumers', 'installations', 'enrollments'] as const)
  const q = new URLSearchParams({ organization_ids: tenant.customerId, page: String(c.random.int(1, 3)), page_size: String(c.random.int(10, 100)) })
  return {
    kind: `GET /api/${list}`,
    scenario: 'normal',
    role: c.random.pick(['vendor', 'vendor_viewer'] as const),
    method: 'GET',
    path: `/api/${list}?${q}`,
    expect: 200,
    check: listCheck(list, q, (items) =>
      c.run.checkOwned(tenant.index, items.map((r) => r[`${list.slice(0, -1)}_id`] as string), `vendor's ${list} list of tenant ${tenant.index}`),
    ),
  }
}
