/** The tenant's organization-level writes: only its first client makes them, so the model of them stays exact. */
import type { LoadClient } from './client'
import { ORG_ENVIRONMENTS, sortedList, wrong, type Step } from './model'
import { activateOrSuspend, nextActiveState, stateChangeStep } from './step-shapes'

export function organizationWrite(c: LoadClient): Step | null {
  const role = c.random.pick(['admin', 'vendor'] as const)
  switch (c.random.int(0, 5)) {
    case 0:
      return updateCustomerDescription(c, role)
    case 1:
      return changeTogglePartnerState(c, role)
    case 2:
      return createPartner(c)
    default:
      return changeOrganizationEnvironments(c, role)
  }
}

function updateCustomerDescription(c: LoadClient, role: 'admin' | 'vendor'): Step {
  const tenant = c.tenant
  const description = `tenant ${tenant.index} ${c.text('customer')}`
  return {
    kind: 'PATCH /api/organizations/{id}',
    scenario: 'normal',
    role,
    method: 'PATCH',
    path: `/api/organizations/${tenant.customerId}`,
    body: { description },
    expect: 200,
    check: (b) => (b.organization?.description === description && b.organization.organization_type === 'customer' ? null : wrong('not the description sent')),
    done: () => (tenant.customerDescription = description),
  }
}

function changeTogglePartnerState(c: LoadClient, role: 'admin' | 'vendor'): Step {
  const tenant = c.tenant
  const to = nextActiveState(c, tenant.togglePartnerState, 0.12)
  return stateChangeStep({
    resource: 'organization',
    id: tenant.togglePartnerId,
    action: activateOrSuspend(to),
    from: tenant.togglePartnerState,
    to,
    role,
    shows: (b) => b.organization?.state === to && b.organization.parent_id === tenant.customerId,
    done: () => (tenant.togglePartnerState = to),
  })
}

/** The customer's admin creates it, so it is the customer's partner. */
function createPartner(c: LoadClient): Step | null {
  if (c.budget.partners <= 0) return null
  c.budget.partners--
  const tenant = c.tenant
  const description = c.text('partner')
  return {
    kind: 'POST /api/organizations',
    scenario: 'normal',
    role: 'admin',
    method: 'POST',
    path: '/api/organizations',
    body: { description },
    expect: 201,
    check: (b) => (b.organization?.organization_type === 'partner' && b.organization.parent_id === tenant.customerId ? null : wrong('not a partner of this customer')),
    done: (b) => {
      c.run.owner.set(b.organization.organization_id, tenant.index)
      tenant.newPartners.push(b.organization.organization_id)
      c.run.noteCreated()
    },
  }
}

/** The customer's default environment, and SCRATCH added or removed. */
function changeOrganizationEnvironments(c: LoadClient, role: 'admin' | 'vendor'): Step {
  const tenant = c.tenant
  const path = `/api/organizations/${tenant.customerId}/environments`
  if (!tenant.envEnabled) {
    return { kind: 'PATCH /api/organizations/{id}/environments', scenario: 'not-enabled', role, method: 'PATCH', path, body: { environment: 'SCRATCH' }, expect: 404 }
  }
  const supported = (scratch: boolean) => sortedList([...ORG_ENVIRONMENTS.split(','), ...(scratch ? ['SCRATCH'] : [])])
  const pick = c.random.int(0, 9)
  if (pick < 4) {
    const to = tenant.defaultEnvironment === 'PROD' ? 'TEST' : 'PROD'
    return {
      kind: 'PATCH /api/organizations/{id}/environments',
      scenario: 'normal',
      role,
      method: 'PATCH',
      path,
      body: { default: to },
      expect: 200,
      check: (b) => (b.organization_id === tenant.customerId && b.default === to && b.supported === supported(tenant.scratch) ? null : wrong(`expected default ${to}`)),
      done: () => (tenant.defaultEnvironment = to),
    }
  }
  if (pick < 5) {
    // Removing the default: 409.
    return { kind: 'DELETE /api/organizations/{id}/environments', scenario: 'conflict', role, method: 'DELETE', path, body: { environment: tenant.defaultEnvironment }, expect: 409 }
  }
  const noOp = pick === 5
  // Add SCRATCH when absent, remove it when there; a no-op the other way round (adding: 409, removing: 404).
  // After a 200, SCRATCH is there exactly when it was added.
  const add = noOp ? tenant.scratch : !tenant.scratch
  return {
    kind: `${add ? 'PATCH' : 'DELETE'} /api/organizations/{id}/environments`,
    scenario: noOp ? 'conflict' : 'normal',
    role,
    method: add ? 'PATCH' : 'DELETE',
    path,
    body: { environment: 'scratch' },
    expect: noOp ? (add ? 409 : 404) : 200,
    // The add and remove answers name the organization's id `application_id` (a quirk of the specification: docs/api.md "Organization environments").
    check: (b) => (b.application_id === tenant.customerId && b.supported === supported(add) && b.default === tenant.defaultEnvironment ? null : wrong(`expected ${supported(add)}`)),
    done: () => (tenant.scratch = add),
  }
}
