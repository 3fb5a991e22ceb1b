/** Writes the server must refuse: a role that may not make them, or another tenant's record. */
import { newClientKey } from '../random'
import type { LoadClient } from './client'
import type { Role, Step } from './model'

/** A write this tenant's token may not make: 403 (or 404 where the record is out of the token's scope). */
export function forbiddenWrite(c: LoadClient): Step | null {
  const consumer = c.pickKey(c.consumers)
  const choice = c.random.int(0, 7)
  const step = (kind: string, role: Role, method: string, path: string, body: unknown, expect = 403): Step => ({
    kind,
    scenario: expect === 403 ? 'forbidden' : 'out-of-scope',
    role,
    method,
    path,
    ...(body !== undefined ? { body } : {}),
    expect,
  })
  switch (choice) {
    case 0:
      return consumer ? step('PATCH /api/consumers/{id}/{action}', 'viewer', 'PATCH', `/api/consumers/${consumer}/${c.consumers.get(consumer)!.state === 'active' ? 'suspend' : 'activate'}`, undefined) : null
    case 1:
      return step('POST /api/consumers', c.random.pick(['viewer', 'vendor_viewer'] as const), 'POST', '/api/consumers', { consumer_id: crypto.randomUUID(), organization_id: c.customerId })
    case 2:
      return step('POST /api/organizations', 'application_admin', 'POST', '/api/organizations', { description: c.text('partner') })
    case 3:
      return step('POST /api/applications', 'partner', 'POST', '/api/applications', { organization_id: c.customerId, description: c.text('application') })
    case 4:
      return step('PATCH /api/applications/{id}', 'viewer', 'PATCH', `/api/applications/${c.app.id}`, { description: c.text('application') })
    case 5:
      return step('PATCH /api/organizations/{id}', c.random.pick(['application_admin', 'viewer'] as const), 'PATCH', `/api/organizations/${c.customerId}`, { description: c.text('customer') })
    case 6:
      // A customer may not suspend itself (only the vendor suspends customers).
      return step('PATCH /api/organizations/{id}/{action}', 'admin', 'PATCH', `/api/organizations/${c.customerId}/suspend`, undefined)
    default:
      // Organization environments are out of a partner's scope: 404.
      return step('PATCH /api/organizations/{id}/environments', 'partner', 'PATCH', `/api/organizations/${c.customerId}/environments`, { environment: 'SCRATCH' }, 404)
  }
}

/** A write to another tenant's record with this tenant's token: 404, and nothing changes. */
export function crossTenantWrite(c: LoadClient): Step | null {
  const other = c.run.otherTenant(c.tenant, c.random)
  const client = c.someClient(other)
  const role = c.random.pick(['admin', 'application_admin', 'partner'] as const)
  const step = (kind: string, method: string, path: string, body?: unknown): Step => ({ kind, scenario: 'cross-tenant', role, method, path, ...(body !== undefined ? { body } : {}), expect: 404 })
  const consumer = client.pickKey(client.consumers)
  const installation = client.pickKey(client.installations)
  const enrollment = client.pickKey(client.enrollments)
  switch (c.random.int(0, 9)) {
    case 0:
      return consumer ? step('PATCH /api/consumers/{id}/{action}', 'PATCH', `/api/consumers/${consumer}/${c.random.pick(['suspend', 'activate'])}`) : null
    case 1:
      return installation ? step('PATCH /api/installations/{id}', 'PATCH', `/api/installations/${installation}`, { description: c.text('stolen') }) : null
    case 2:
      return installation ? step('PATCH /api/installations/{id}/{action}', 'PATCH', `/api/installations/${installation}/${c.random.pick(['suspend', 'verify'])}`) : null
    case 3:
      return step('PATCH /api/applications/{id}/{action}', 'PATCH', `/api/applications/${client.app.id}/${c.random.pick(['suspend', 'activate'])}`)
    case 4:
      return step('POST /api/enrollments', 'POST', '/api/enrollments', {
        enrollment_id: crypto.randomUUID(),
        consumer_id: crypto.randomUUID(),
        installation_id: crypto.randomUUID(),
        application_id: client.app.id,
        environment: other.envEnabled ? 'PROD' : 'PRODUCTION',
        installation_description: c.text('stolen'),
      })
    case 5:
      return enrollment ? step('POST /api/enrollments/{id}/keysets', 'POST', `/api/enrollments/${enrollment}/keysets`, { client_enclave_key: newClientKey() }) : null
    case 6:
      return enrollment ? step('PATCH /api/enrollments/{id}/{action}', 'PATCH', `/api/enrollments/${enrollment}/${c.random.pick(['suspend', 'activate'])}`) : null
    case 7:
      return step('PATCH /api/organizations/{id}', 'PATCH', `/api/organizations/${c.random.pick([other.customerId, other.togglePartnerId])}`, { description: c.text('stolen') })
    case 8:
      return step('POST /api/environments/{id}', 'POST', `/api/environments/${client.app.id}`, { environment: 'DEV' })
    default:
      // A body naming another tenant's customer.
      return step('POST /api/consumers', 'POST', '/api/consumers', { consumer_id: crypto.randomUUID(), organization_id: other.customerId })
  }
}
