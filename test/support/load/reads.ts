/** The read steps for one record (the lists are in lists.ts). */
import type { LoadClient } from './client'
import { ORG_ENVIRONMENTS, wrong, type Body, type Role, type Step, type Tenant } from './model'

/** A record of this tenant, with any of its roles or the vendor's. */
export function getOwnTenantRecord(c: LoadClient): Step | null {
  const kind = c.random.pick(['consumer', 'installation', 'application', 'enrollment', 'organization'] as const)
  const role = c.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor', 'vendor_viewer'] as const)
  switch (kind) {
    case 'organization':
      return getOrganization(c, role)
    case 'enrollment':
      return getOwnEnrollment(c, role)
    // These of any client of the tenant: only the client's own are compared with its model.
    case 'application':
      return getApplication(c, role, c.someClient())
    case 'consumer':
      return getConsumer(c, role, c.someClient())
    case 'installation':
      return getInstallation(c, role, c.someClient())
  }
}

function getOrganization(c: LoadClient, role: Role): Step {
  const target = c.random.pick([c.customerId, c.tenant.partnerId, c.tenant.togglePartnerId])
  // A partner token reads only its own organization.
  const visible = role !== 'partner' || target === c.tenant.partnerId
  return {
    kind: 'GET /api/organizations/{id}',
    scenario: visible ? 'normal' : 'out-of-scope',
    role,
    method: 'GET',
    path: `/api/organizations/${target}`,
    expect: visible ? 200 : 404,
    check: (b) => (b.organization?.organization_id === target ? null : wrong('another organization')),
  }
}

/** Own enrollments only: their application's state (suspended: 401) is known. */
function getOwnEnrollment(c: LoadClient, role: Role): Step | null {
  const id = c.pickKey(c.enrollments)
  if (!id) return null
  const e = c.enrollments.get(id)!
  return {
    kind: 'GET /api/enrollments/{id}',
    scenario: e.app.state === 'active' ? 'normal' : 'suspended-app',
    role,
    method: 'GET',
    path: `/api/enrollments/${id}`,
    expect: e.app.state === 'active' ? 200 : 401,
    check: (b) => {
      const r = b.enrollment
      if (r?.enrollment_id !== id || r.application_id !== e.app.id || r.consumer_id !== e.consumer || r.installation_id !== e.installation) return wrong('another enrollment')
      const active = e.keysets[e.keysets.length - 1] ?? null
      if (r.state !== e.state || r.active_keyset_id !== active) return wrong(`expected ${e.state}, keyset ${active}`)
      if (r.nickname !== `${e.installation}:${e.consumer}:${e.app.id}:${e.environment}`) return wrong('nickname')
      return null
    },
  }
}

function getApplication(c: LoadClient, role: Role, client: LoadClient): Step {
  const own = client === c
  const app = c.random.pick(client.apps)
  return {
    kind: 'GET /api/applications/{id}',
    scenario: 'normal',
    role,
    method: 'GET',
    path: `/api/applications/${app.id}`,
    expect: 200,
    check: (b) => {
      const r = b.application
      if (r?.application_id !== app.id || r.organization_id !== c.customerId) return wrong('another application')
      if (own && (r.state !== app.state || r.description !== app.description)) return wrong(`expected ${app.state} "${app.description}"`)
      if (own && c.tenant.envEnabled && r.allowed_environments !== app.environments.join(',')) return wrong(`expected environments ${app.environments}`)
      if (!c.tenant.envEnabled && 'allowed_environments' in r) return wrong('allowed_environments on a customer without environments')
      if ('api_key' in r) return wrong('api_key shown on a read')
      return null
    },
  }
}

function getConsumer(c: LoadClient, role: Role, client: LoadClient): Step | null {
  const own = client === c
  const id = client.pickKey(client.consumers)
  if (!id) return null
  const model = client.consumers.get(id)!
  return {
    kind: 'GET /api/consumers/{id}',
    scenario: 'normal',
    role,
    method: 'GET',
    path: `/api/consumers/${id}`,
    expect: 200,
    check: (b) => (b.consumer?.consumer_id !== id ? wrong('another consumer') : own && b.consumer.state !== model.state ? wrong(`expected ${model.state}`) : null),
  }
}

function getInstallation(c: LoadClient, role: Role, client: LoadClient): Step | null {
  const own = client === c
  const id = client.pickKey(client.installations)
  if (!id) return null
  const model = client.installations.get(id)!
  return {
    kind: 'GET /api/installations/{id}',
    scenario: 'normal',
    role,
    method: 'GET',
    path: `/api/installations/${id}`,
    expect: 200,
    check: (b) => {
      if (b.installation?.installation_id !== id) return wrong('another installation')
      if (own && (b.installation.state !== model.state || b.installation.description !== model.description)) return wrong(`expected ${model.state} "${model.description}"`)
      return null
    },
  }
}

/** Another tenant's record with this tenant's token: 404, whatever the role. */
export function getOtherTenantRecord(c: LoadClient): Step | null {
  const other = c.run.otherTenant(c.tenant, c.random)
  const role = c.tenantReader()
  const target = c.random.int(0, 9)
  let kind: string, path: string
  if (target === 0) {
    kind = 'GET /api/organizations/{id}'
    path = `/api/organizations/${c.random.pick([other.customerId, other.partnerId, c.run.vendorId])}`
  } else if (target === 1) {
    kind = 'GET /api/organizations/{id}/environments'
    path = `/api/organizations/${other.customerId}/environments`
  } else {
    const record = recordOf(c, other)
    if (!record) return null
    if (target === 2 && record.kind === 'enrollment') {
      kind = 'GET /api/enrollments/{id}/keysets'
      path = `/api/enrollments/${record.id}/keysets`
    } else if (target === 3 && record.kind === 'application') {
      kind = 'GET /api/environments/{id}'
      path = `/api/environments/${record.id}`
    } else {
      kind = `GET /api/${record.kind}s/{id}`
      path = `/api/${record.kind}s/${record.id}`
    }
  }
  return { kind, scenario: 'cross-tenant', role, method: 'GET', path, expect: 404 }
}

/** A known record of one of `tenant`'s clients, or null when that client has none of the kind picked. */
function recordOf(c: LoadClient, tenant: Tenant): { kind: 'consumer' | 'installation' | 'application' | 'enrollment'; id: string } | null {
  const client = c.someClient(tenant)
  const kind = c.random.pick(['consumer', 'installation', 'application', 'enrollment'] as const)
  const id =
    kind === 'consumer' ? client.pickKey(client.consumers)
    : kind === 'installation' ? client.pickKey(client.installations)
    : kind === 'enrollment' ? client.pickKey(client.enrollments)
    : c.random.pick(client.apps).id
  return id ? { kind, id } : null
}

export function getKeysets(c: LoadClient): Step | null {
  const id = c.pickKey(c.enrollments)
  if (!id) return null
  const e = c.enrollments.get(id)!
  const active = e.app.state === 'active'
  return {
    kind: 'GET /api/enrollments/{id}/keysets',
    scenario: active ? 'normal' : 'suspended-app',
    role: c.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor_viewer'] as const),
    method: 'GET',
    path: `/api/enrollments/${id}/keysets`,
    expect: active ? 200 : 401,
    check: (body) => {
      const keysets = body.keysets as Body[]
      if (keysets.map((k) => k.keyset_id).join() !== e.keysets.join()) return wrong(`keysets ${keysets.map((k) => k.keyset_id)}, expected ${e.keysets}`)
      for (const [i, k] of keysets.entries()) {
        const state = i === keysets.length - 1 ? 'active' : 'retired'
        if (k.enrollment_id !== id || k.environment !== e.environment || k.state !== state) return wrong(`keyset ${k.keyset_id}: expected ${state}`)
      }
      return null
    },
  }
}

export function getOrganizationEnvironments(c: LoadClient): Step {
  const role = c.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor'] as const)
  const found = c.tenant.envEnabled && role !== 'partner'
  return {
    kind: 'GET /api/organizations/{id}/environments',
    scenario: found ? 'normal' : role === 'partner' ? 'out-of-scope' : 'not-enabled',
    role,
    method: 'GET',
    path: `/api/organizations/${c.customerId}/environments`,
    expect: found ? 200 : 404,
    check: (body) => {
      // Its first client changes them meanwhile: only what always holds.
      const supported = String(body.supported).split(',')
      if (body.organization_id !== c.customerId) return wrong('another organization')
      if (!ORG_ENVIRONMENTS.split(',').every((n) => supported.includes(n)) || !supported.includes(body.default)) return wrong('environments')
      return supported.join(',') === [...supported].sort().join(',') ? null : wrong('not sorted')
    },
  }
}

export function getApplicationEnvironments(c: LoadClient): Step {
  const app = c.random.pick(c.knownApps())
  return {
    kind: 'GET /api/environments/{id}',
    scenario: c.tenant.envEnabled ? 'normal' : 'not-enabled',
    role: c.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor_viewer'] as const),
    method: 'GET',
    path: `/api/environments/${app.id}`,
    expect: c.tenant.envEnabled ? 200 : 404,
    check: (body) => (body.application_id === app.id && body.environments === app.environments.join(',') ? null : wrong(`expected ${app.environments}`)),
  }
}
