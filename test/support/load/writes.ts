/** The write steps on the client's own records: consumers, installations, enrollments, keysets, applications. */
import { newClientKey } from '../random'
import type { LoadClient } from './client'
import { ENROLLMENT_ENVIRONMENTS, sortedList, wrong, type AppModel, type InstallationState, type Scenario, type Step } from './model'
import { activateOrSuspend, createOrRepeatStep, descriptionUpdateStep, nextActiveState, stateChangeStep } from './step-shapes'

// Consumers and installations ------------------------------------------------------------------

export function createConsumer(c: LoadClient): Step | null {
  return createOrRepeatStep(c, {
    resource: 'consumer',
    records: (client) => client.consumers,
    fields: {},
    created: { state: 'active' },
    matches: (record, model) => record.state === model.state,
    describe: (model) => model.state,
  })
}

export function changeConsumerState(c: LoadClient): Step | null {
  const id = c.pickKey(c.consumers)
  if (!id) return null
  const model = c.consumers.get(id)!
  const to = nextActiveState(c, model.state, 0.12)
  return stateChangeStep({
    resource: 'consumer',
    id,
    action: activateOrSuspend(to),
    from: model.state,
    to,
    role: c.writer(),
    shows: (b) => b.consumer?.consumer_id === id && b.consumer.state === to,
    done: () => (model.state = to),
    taint: () => c.run.uncertain.add(id),
  })
}

export function createInstallation(c: LoadClient): Step | null {
  const description = c.text('installation')
  return createOrRepeatStep(c, {
    resource: 'installation',
    records: (client) => client.installations,
    fields: { description },
    created: { state: 'unregistered', description },
    matches: (record, model) => record.state === model.state && record.description === model.description,
    describe: (model) => `${model.state} "${model.description}"`,
  })
}

export function updateInstallation(c: LoadClient): Step | null {
  const id = c.pickKey(c.installations)
  if (!id) return null
  const description = c.text('installation')
  return descriptionUpdateStep(c, 'installation', id, c.installations.get(id)!, c.writer(), description)
}

export function changeInstallationState(c: LoadClient): Step | null {
  const id = c.pickKey(c.installations)
  if (!id) return null
  const model = c.installations.get(id)!
  // Suspend from unregistered or verified; verify from unregistered or suspended; the others are no-ops (409).
  const action = c.random.pick(['suspend', 'verify'] as const)
  const to: InstallationState = action === 'suspend' ? 'suspended' : 'verified'
  const noOp = model.state === to
  if (noOp && !c.random.chance(0.25)) return null // keep deliberate no-ops to a fraction
  return stateChangeStep({
    resource: 'installation',
    id,
    action,
    from: model.state,
    to,
    role: c.writer(),
    shows: (b) => b.installation?.state === to,
    done: () => (model.state = to),
    taint: () => c.run.uncertain.add(id),
  })
}

// Enrollments and keysets ----------------------------------------------------------------------

export function createEnrollment(c: LoadClient): Step | null {
  const role = c.writer()
  const app = c.app
  const description = c.text('installation')
  const existing = c.pickKey(c.enrollments)
  const roll = c.random.float()
  // The client enrolls in its main application only.
  const post = (scenario: Scenario, expect: number, e: { id: string; consumer: string; installation: string; environment: string }) => ({
    kind: 'POST /api/enrollments',
    scenario,
    role,
    method: 'POST',
    path: '/api/enrollments',
    body: { enrollment_id: e.id, consumer_id: e.consumer, installation_id: e.installation, application_id: app.id, environment: e.environment, installation_description: description },
    expect,
  })
  if (app.state === 'suspended') {
    // The application's customer deactivated it: 401, nothing created.
    return post('suspended-app', 401, { id: crypto.randomUUID(), consumer: crypto.randomUUID(), installation: crypto.randomUUID(), environment: c.appEnvironments[0]! })
  }
  if (existing && roll < 0.15) {
    // The same enrollment again: the existing record.
    const e = c.enrollments.get(existing)!
    return {
      ...post('normal', 200, e),
      check: (b) => (b.enrollment?.enrollment_id === e.id && b.enrollment.state === e.state && b.enrollment.active_keyset_id === (e.keysets[e.keysets.length - 1] ?? null) ? null : wrong(`expected the existing enrollment, ${e.state}`)),
      taint: () => c.run.uncertain.add(e.id),
    }
  }
  if (existing && roll < 0.22) {
    // The same enrollment_id claimed with another consumer (the compromised client of docs/api.md "Enrollments"): 400.
    const e = c.enrollments.get(existing)!
    return post('conflict', 400, { ...e, consumer: crypto.randomUUID() })
  }
  const suspendedConsumer = c.pickKey(c.consumers, (id) => c.consumers.get(id)!.state === 'suspended')
  const usableInstallation = c.pickKey(c.installations, (id) => c.installations.get(id)!.state !== 'suspended')
  if (suspendedConsumer && usableInstallation && roll < 0.3) {
    // Enrolling a suspended consumer: 409 (an existing tuple would be 409 as well).
    return post('conflict', 409, { id: crypto.randomUUID(), consumer: suspendedConsumer, installation: usableInstallation, environment: c.random.pick(c.appEnvironments) })
  }

  // A new enrollment, with an existing or a new consumer and installation, as the budget allows.
  if (c.budget.enrollments <= 0) return null
  const environment = c.random.pick(c.appEnvironments)
  const activeConsumer = c.pickKey(c.consumers, (id) => c.consumers.get(id)!.state === 'active')
  const newConsumer = !activeConsumer || (c.budget.consumers > 0 && c.random.chance(0.3))
  const newInstallation = !usableInstallation || (c.budget.installations > 0 && c.random.chance(0.3))
  if ((newConsumer && c.budget.consumers <= 0) || (newInstallation && c.budget.installations <= 0)) return null
  const consumer = newConsumer ? crypto.randomUUID() : activeConsumer!
  const installation = newInstallation ? crypto.randomUUID() : usableInstallation!
  const taken = [...c.enrollments.values()].some((e) => e.consumer === consumer && e.installation === installation && e.app === app && e.environment === environment)
  if (taken) return null
  c.budget.enrollments--
  if (newConsumer) c.budget.consumers--
  if (newInstallation) c.budget.installations--
  const id = crypto.randomUUID()
  for (const created of [id, ...(newConsumer ? [consumer] : []), ...(newInstallation ? [installation] : [])]) c.run.owner.set(created, c.tenant.index)
  return {
    ...post('normal', 201, { id, consumer, installation, environment }),
    check: (b) => {
      const r = b.enrollment
      if (r?.enrollment_id !== id || r.consumer_id !== consumer || r.installation_id !== installation || r.application_id !== app.id || r.environment !== environment) return wrong('not the enrollment sent')
      if (r.state !== 'active' || r.active_keyset_id !== null || r.client_enclave_key !== null || r.client_storage_key_shares !== null) return wrong('not a new enrollment')
      return r.nickname === `${installation}:${consumer}:${app.id}:${environment}` ? null : wrong('nickname')
    },
    done: () => {
      c.enrollments.set(id, { id, consumer, installation, app, environment, state: 'active', keysets: [] })
      c.run.noteCreated()
      if (newConsumer) {
        c.consumers.set(consumer, { state: 'active' })
        c.run.noteCreated()
      }
      if (newInstallation) {
        c.installations.set(installation, { state: 'unregistered', description })
        c.run.noteCreated()
      }
    },
    taint: () => {
      for (const created of [id, consumer, installation]) c.run.uncertain.add(created)
    },
  }
}

export function changeEnrollmentState(c: LoadClient): Step | null {
  const id = c.pickKey(c.enrollments)
  if (!id) return null
  const e = c.enrollments.get(id)!
  const to = nextActiveState(c, e.state, 0.12)
  return stateChangeStep({
    resource: 'enrollment',
    id,
    action: activateOrSuspend(to),
    from: e.state,
    to,
    appSuspended: e.app.state !== 'active',
    role: c.writer(),
    shows: (b) => b.enrollment?.enrollment_id === id && b.enrollment.state === to,
    done: () => (e.state = to),
    taint: () => c.run.uncertain.add(id),
  })
}

export function createKeyset(c: LoadClient): Step | null {
  const suspended = c.pickKey(c.enrollments, (id) => c.enrollments.get(id)!.state === 'suspended')
  const active = c.pickKey(c.enrollments, (id) => c.enrollments.get(id)!.state === 'active')
  // Sometimes a suspended enrollment on purpose (409); once the budget is spent, only those.
  const probe = suspended !== null && c.random.chance(c.budget.keysets > 0 ? 0.1 : 0.2)
  const id = probe ? suspended : c.budget.keysets > 0 ? active : null
  if (!id) return null
  const e = c.enrollments.get(id)!
  const key = newClientKey()
  const appActive = e.app.state === 'active'
  const creates = appActive && !probe
  if (creates) c.budget.keysets--
  const previous = e.keysets[e.keysets.length - 1] ?? null
  return {
    kind: 'POST /api/enrollments/{id}/keysets',
    scenario: !appActive ? 'suspended-app' : probe ? 'conflict' : 'normal',
    role: c.writer(),
    method: 'POST',
    path: `/api/enrollments/${id}/keysets`,
    body: { client_enclave_key: key },
    expect: !appActive ? 401 : probe ? 409 : 201,
    check: (b) => {
      const r = b.enrollment
      if (r?.enrollment_id !== id || r.client_enclave_key !== key) return wrong('not the key sent')
      if (typeof r.active_keyset_id !== 'string' || r.active_keyset_id === previous || e.keysets.includes(r.active_keyset_id)) return wrong('no new keyset')
      return null
    },
    done: (b) => {
      e.keysets.push(b.enrollment.active_keyset_id)
      c.run.owner.set(b.enrollment.active_keyset_id, c.tenant.index)
      c.run.noteCreated()
    },
    taint: () => c.run.uncertain.add(id),
  }
}

// Applications ---------------------------------------------------------------------------------

export function updateApplication(c: LoadClient): Step {
  const app = c.random.pick(c.knownApps())
  const description = c.text('application')
  return descriptionUpdateStep(c, 'application', app.id, app, c.appWriter(), description)
}

export function changeApplicationState(c: LoadClient): Step {
  const app = c.random.pick(c.knownApps())
  return setApplicationState(c, app, nextActiveState(c, app.state, 0.1))
}

/** Also how a client activates its suspended main application again (client.ts). */
export function setApplicationState(c: LoadClient, app: AppModel, to: AppModel['state']): Step {
  return stateChangeStep({
    resource: 'application',
    id: app.id,
    action: activateOrSuspend(to),
    from: app.state,
    to,
    role: c.appWriter(),
    shows: (b) => b.application?.application_id === app.id && b.application.state === to,
    done: () => (app.state = to),
    // The state is needed for everything else: read it back.
    taint: () => c.run.uncertain.add(app.id),
  })
}

export function changeApplicationEnvironments(c: LoadClient): Step {
  const app = c.app
  const role = c.appWriter()
  if (!c.tenant.envEnabled) {
    return { kind: 'POST /api/environments/{id}', scenario: 'not-enabled', role, method: 'POST', path: `/api/environments/${app.id}`, body: { environment: 'DEV' }, expect: 404 }
  }
  const has = app.environments.includes('DEV')
  const noOp = c.random.chance(0.1)
  // Toggle DEV (never used by enrollments, so never has keysets). A no-op: add it again (409) or remove it while absent (404).
  const add = noOp ? has : !has
  const next = add ? sortedList([...app.environments, 'DEV']) : app.environments.filter((n) => n !== 'DEV').join(',')
  return {
    kind: `${add ? 'POST' : 'DELETE'} /api/environments/{id}`,
    scenario: noOp ? 'conflict' : 'normal',
    role,
    method: add ? 'POST' : 'DELETE',
    path: `/api/environments/${app.id}`,
    body: { environment: c.random.chance(0.5) ? 'dev' : 'DEV' },
    expect: noOp ? (add ? 409 : 404) : 200,
    check: (b) => (b.application_id === app.id && b.environments === next ? null : wrong(`expected ${next}`)),
    done: () => (app.environments = next.split(',')),
    taint: () => c.run.uncertain.add(app.id),
  }
}

export function createApplication(c: LoadClient): Step | null {
  if (c.budget.applications <= 0) return null
  c.budget.applications--
  const id = crypto.randomUUID()
  c.run.owner.set(id, c.tenant.index)
  const description = c.text('application')
  const environments = c.tenant.envEnabled ? c.random.subset(ENROLLMENT_ENVIRONMENTS).sort() : ['PRODUCTION']
  return {
    kind: 'POST /api/applications',
    scenario: 'normal',
    role: c.appWriter(),
    method: 'POST',
    path: '/api/applications',
    body: { application_id: id, organization_id: c.customerId, description, ...(c.tenant.envEnabled ? { allowed_environments: environments.join(',') } : {}) },
    expect: 201,
    check: (b) => {
      const a = b.application
      if (a?.application_id !== id || a.organization_id !== c.customerId || a.state !== 'active' || a.description !== description) return wrong('not the application sent')
      if ((a.allowed_environments ?? 'PRODUCTION') !== environments.join(',')) return wrong(`environments ${a.allowed_environments}`)
      return typeof a.api_key === 'string' && typeof a.host_url === 'string' ? null : wrong('no client configuration')
    },
    done: () => {
      c.apps.push({ id, state: 'active', description, environments })
      c.run.noteCreated()
    },
    taint: () => c.run.uncertain.add(id),
  }
}
