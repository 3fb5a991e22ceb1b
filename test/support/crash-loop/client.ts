/** One client: a customer and everything under it, written one request at a time. */
import { newClientKey, type Random } from '../random'
import { api, type HttpAnswer } from '../server-process'
import { ANY, sameValue, type Fields, type Kind } from './model'
import type { CrashLoop } from './loop'

const ENVIRONMENT_POOL = ['PROD', 'TEST', 'DEV', 'QA', 'STAGING', 'EU', 'US']

interface WriteStep {
  readonly operation: string
  readonly method: string
  readonly path: string
  readonly body?: unknown
  readonly expect: number
  /** Records what an unanswered attempt may have done. */
  readonly unanswered: () => void
  /** Records the acknowledged effect, from the answer. */
  readonly acknowledged: (body: Fields) => void
}

const LIMITS = { partners: 2, applications: 3, consumers: 6, installations: 6, enrollments: 10, tokens: 4 }

export class Client {
  private customer: string | null = null
  private partners: string[] = []
  private applications: string[] = []
  private consumers: string[] = []
  private installations: string[] = []
  private enrollments: string[] = []
  private tokens: string[] = []
  private counter = 0

  constructor(
    private readonly loop: CrashLoop,
    private readonly random: Random,
    private readonly number: number,
  ) {}

  /** Writes up to `count` times; stops early when the server dies (an unanswered write). */
  async steps(count: number): Promise<void> {
    for (let i = 0; i < count && !this.loop.stopped; i++) {
      const step = this.choose()
      let res: HttpAnswer
      try {
        res = await api(this.loop.url, this.loop.token, step.method, step.path, step.body)
      } catch {
        // Cut off by the kill: it may or may not have happened; verification decides.
        step.unanswered()
        this.loop.countUnanswered()
        return
      }
      if (res.status !== step.expect) {
        this.loop.reportUnexpected(`client ${this.number} ${step.operation} ${step.method} ${step.path}: expected ${step.expect}, got ${res.status} ${JSON.stringify(res.body)}`)
        return
      }
      step.acknowledged(res.body as Fields)
      this.loop.countAcknowledged(step.operation)
    }
  }

  /** After a verification: drop ids of records that turned out not to exist. */
  forget(kind: Kind, id: string): void {
    const drop = (list: string[]) => {
      const at = list.indexOf(id)
      if (at !== -1) list.splice(at, 1)
    }
    if (kind === 'organization') {
      if (this.customer === id) this.customer = null
      drop(this.partners)
    } else if (kind === 'application') drop(this.applications)
    else if (kind === 'consumer') drop(this.consumers)
    else if (kind === 'installation') drop(this.installations)
    else if (kind === 'enrollment') drop(this.enrollments)
    else if (kind === 'token') drop(this.tokens)
  }

  /** After a verification: nothing to do yet (the model reads state from the tracked records). */
  settle(): void {}

  private description(what: string): string {
    return `${what} ${this.number}.${++this.counter}`
  }

  private state(kind: Kind, id: string): Fields {
    return this.loop.state(kind, id)
  }

  /** The customer's environments; null when it is not enabled for virtual environments. */
  private environments(): { default: string; supported: string[] } | null {
    const set = this.loop.get('environments', this.customer!)?.acked
    if (!set) return null
    return { default: set.default as string, supported: (set.supported as string).split(',') }
  }

  private applicationEnvironments(app: string): string[] {
    const list = this.state('application', app).allowed_environments as string | undefined
    return list ? list.split(',') : ['PRODUCTION']
  }

  /** True if some enrollment of `app` in `environment` has had a keyset. */
  private hasKeysets(app: string, environment: string): boolean {
    return this.enrollments.some((id) => {
      const e = this.state('enrollment', id)
      return e.application_id === app && e.environment === environment && e.active_keyset_id !== null
    })
  }

  private choose(): WriteStep {
    if (!this.customer) return this.createCustomer()
    const options: (() => WriteStep | null)[] = [
      () => (this.partners.length < LIMITS.partners ? this.createPartner() : null),
      () => this.updateOrganization(),
      () => this.toggleOrganization(),
      () => this.changeOrganizationEnvironments(),
      () => (this.applications.length < LIMITS.applications ? this.createApplication() : null),
      () => this.updateApplication(),
      () => this.toggleApplication(),
      () => this.changeApplicationEnvironments(),
      () => (this.consumers.length < LIMITS.consumers ? this.createConsumer() : null),
      () => this.toggleConsumer(),
      () => (this.installations.length < LIMITS.installations ? this.createInstallation() : null),
      () => this.updateInstallation(),
      () => this.changeInstallationState(),
      () => (this.enrollments.length < LIMITS.enrollments ? this.createEnrollment() : null),
      () => this.toggleEnrollment(),
      () => this.createKeyset(),
      () => this.createKeyset(),
      () => (this.tokens.length < LIMITS.tokens ? this.createToken() : null),
      () => this.revokeToken(),
    ]
    for (;;) {
      const step = this.random.pick(options)()
      if (step) return step
    }
  }

  // Organizations ------------------------------------------------------------------------------

  private createCustomer(): WriteStep {
    const description = this.description('customer')
    const supported = this.random.chance(0.7) ? this.random.subset(ENVIRONMENT_POOL.slice(0, 3)).sort() : null
    const defaultEnvironment = supported ? this.random.pick(supported) : null
    const environments = supported ? { default: defaultEnvironment!, supported: supported.join(',') } : null
    const adopt = (id: string) => {
      this.customer = id
      if (environments) this.loop.maybe('environments', id, environments)
    }
    return {
      operation: 'organization create',
      method: 'POST',
      path: '/api/organizations',
      body: { description, parent_id: this.loop.vendorId, ...(environments ? { supported_environments: environments } : {}) },
      expect: 201,
      unanswered: () => this.loop.maybeCreated({ kind: 'organization', fields: { description, state: 'active' }, adopt }),
      acknowledged: (body) => {
        const org = body.organization as Fields
        const id = org.organization_id as string
        this.loop.acknowledge('organization', id, org)
        if (environments) this.loop.acknowledge('environments', id, org.supported_environments as Fields)
        this.customer = id
      },
    }
  }

  private createPartner(): WriteStep {
    const description = this.description('partner')
    return {
      operation: 'organization create',
      method: 'POST',
      path: '/api/organizations',
      body: { description, parent_id: this.customer },
      expect: 201,
      unanswered: () =>
        this.loop.maybeCreated({ kind: 'organization', fields: { description, state: 'active' }, adopt: (id) => this.partners.push(id) }),
      acknowledged: (body) => {
        const org = body.organization as Fields
        this.loop.acknowledge('organization', org.organization_id as string, org)
        this.partners.push(org.organization_id as string)
      },
    }
  }

  private someOrganization(): string {
    return this.random.chance(0.5) || this.partners.length === 0 ? this.customer! : this.random.pick(this.partners)
  }

  private updateOrganization(): WriteStep {
    const id = this.someOrganization()
    const description = this.description('organization')
    return this.change('organization update', 'organization', id, 'PATCH', `/api/organizations/${id}`, { description }, { description }, 'organization')
  }

  private toggleOrganization(): WriteStep {
    const id = this.someOrganization()
    const to = this.state('organization', id).state === 'active' ? 'suspended' : 'active'
    const verb = to === 'active' ? 'activate' : 'suspend'
    return this.change(`organization ${verb}`, 'organization', id, 'PATCH', `/api/organizations/${id}/${verb}`, undefined, { state: to }, 'organization')
  }

  private changeOrganizationEnvironments(): WriteStep | null {
    const envs = this.environments()
    if (!envs) return null
    const used = new Set(this.applications.flatMap((app) => this.applicationEnvironments(app)))
    const choices: (() => WriteStep | null)[] = [
      () => {
        const name = ENVIRONMENT_POOL.find((n) => !envs.supported.includes(n) && this.random.chance(0.5))
        if (!name) return null
        const supported = [...envs.supported, name].sort().join(',')
        return this.environmentsChange('organization environment add', 'PATCH', { environment: name }, { supported })
      },
      () => {
        const others = envs.supported.filter((n) => n !== envs.default)
        if (others.length === 0) return null
        const name = this.random.pick(others)
        return this.environmentsChange('organization environment default', 'PATCH', { default: name }, { default: name })
      },
      () => {
        const removable = envs.supported.filter((n) => n !== envs.default && !used.has(n))
        if (removable.length === 0) return null
        const name = this.random.pick(removable)
        const supported = envs.supported.filter((n) => n !== name).join(',')
        return this.environmentsChange('organization environment remove', 'DELETE', { environment: name }, { supported })
      },
    ]
    return this.random.pick(choices)()
  }

  /** An organization environments change: the answer shows the set, not the organization's `modified`. */
  private environmentsChange(operation: string, method: string, body: Fields, effect: Fields): WriteStep {
    const id = this.customer!
    return {
      operation,
      method,
      path: `/api/organizations/${id}/environments`,
      body,
      expect: 200,
      unanswered: () => {
        this.loop.maybe('environments', id, effect)
        this.loop.maybe('organization', id, {})
      },
      acknowledged: (answer) => {
        this.loop.acknowledge('environments', id, answer)
        this.loop.acknowledge('organization', id, {})
      },
    }
  }

  // Applications -------------------------------------------------------------------------------

  private createApplication(): WriteStep {
    const description = this.description('application')
    const envs = this.environments()
    const allowed = envs ? this.random.subset(envs.supported).sort().join(',') : null
    const organization_id = this.customer!
    const fields: Fields = { organization_id, description, state: 'active', ...(allowed ? { allowed_environments: allowed } : {}) }
    return {
      operation: 'application create',
      method: 'POST',
      path: '/api/applications',
      body: { organization_id, description, ...(allowed ? { allowed_environments: allowed } : {}) },
      expect: 201,
      unanswered: () => this.loop.maybeCreated({ kind: 'application', fields, adopt: (id) => this.applications.push(id) }),
      acknowledged: (body) => {
        const app = body.application as Fields
        this.loop.acknowledge('application', app.application_id as string, app)
        this.applications.push(app.application_id as string)
      },
    }
  }

  private updateApplication(): WriteStep | null {
    if (this.applications.length === 0) return null
    const id = this.random.pick(this.applications)
    const description = this.description('application')
    return this.change('application update', 'application', id, 'PATCH', `/api/applications/${id}`, { description }, { description }, 'application')
  }

  private toggleApplication(): WriteStep | null {
    if (this.applications.length === 0) return null
    const id = this.random.pick(this.applications)
    const to = this.state('application', id).state === 'active' ? 'suspended' : 'active'
    const verb = to === 'active' ? 'activate' : 'suspend'
    return this.change(`application ${verb}`, 'application', id, 'PATCH', `/api/applications/${id}/${verb}`, undefined, { state: to }, 'application')
  }

  private changeApplicationEnvironments(): WriteStep | null {
    const envs = this.environments()
    if (!envs || this.applications.length === 0) return null
    const id = this.random.pick(this.applications)
    const current = this.applicationEnvironments(id)
    let operation: string, method: string, name: string | undefined, next: string[]
    if (this.random.chance(0.5)) {
      name = envs.supported.find((n) => !current.includes(n))
      operation = 'application environment add'
      method = 'POST'
      next = [...current, name!].sort()
    } else {
      name = current.length > 1 ? current.find((n) => !this.hasKeysets(id, n)) : undefined
      operation = 'application environment remove'
      method = 'DELETE'
      next = current.filter((n) => n !== name)
    }
    if (!name) return null
    const allowed_environments = next.join(',')
    return {
      operation,
      method,
      path: `/api/environments/${id}`,
      body: { environment: name },
      expect: 200,
      unanswered: () => this.loop.maybe('application', id, { allowed_environments }),
      // The answer shows the list, not `modified`.
      acknowledged: (body) => this.loop.acknowledge('application', id, { allowed_environments: body.environments }),
    }
  }

  // Consumers and installations ----------------------------------------------------------------

  private createConsumer(): WriteStep {
    const id = this.random.uuid()
    return {
      operation: 'consumer create',
      method: 'POST',
      path: '/api/consumers',
      body: { consumer_id: id, organization_id: this.customer },
      expect: 201,
      unanswered: () => {
        this.loop.maybe('consumer', id, { state: 'active' })
        this.consumers.push(id)
      },
      acknowledged: (body) => {
        this.loop.acknowledge('consumer', id, body.consumer as Fields)
        this.consumers.push(id)
      },
    }
  }

  private toggleConsumer(): WriteStep | null {
    if (this.consumers.length === 0) return null
    const id = this.random.pick(this.consumers)
    const to = this.state('consumer', id).state === 'active' ? 'suspended' : 'active'
    const verb = to === 'active' ? 'activate' : 'suspend'
    return this.change(`consumer ${verb}`, 'consumer', id, 'PATCH', `/api/consumers/${id}/${verb}`, undefined, { state: to }, 'consumer')
  }

  private createInstallation(): WriteStep {
    const id = this.random.uuid()
    const description = this.description('installation')
    return {
      operation: 'installation create',
      method: 'POST',
      path: '/api/installations',
      body: { installation_id: id, description, organization_id: this.customer },
      expect: 201,
      unanswered: () => {
        this.loop.maybe('installation', id, { description, state: 'unregistered' })
        this.installations.push(id)
      },
      acknowledged: (body) => {
        this.loop.acknowledge('installation', id, body.installation as Fields)
        this.installations.push(id)
      },
    }
  }

  private updateInstallation(): WriteStep | null {
    if (this.installations.length === 0) return null
    const id = this.random.pick(this.installations)
    const description = this.description('installation')
    return this.change('installation update', 'installation', id, 'PATCH', `/api/installations/${id}`, { description }, { description }, 'installation')
  }

  private changeInstallationState(): WriteStep | null {
    if (this.installations.length === 0) return null
    const id = this.random.pick(this.installations)
    const state = this.state('installation', id).state
    // Suspend from unregistered or verified; verify from unregistered or suspended.
    const verb = state === 'suspended' ? 'verify' : state === 'verified' ? 'suspend' : this.random.pick(['suspend', 'verify'])
    const to = verb === 'verify' ? 'verified' : 'suspended'
    return this.change(`installation ${verb}`, 'installation', id, 'PATCH', `/api/installations/${id}/${verb}`, undefined, { state: to }, 'installation')
  }

  // Enrollments and keysets --------------------------------------------------------------------

  private activeApplications(): string[] {
    return this.applications.filter((id) => this.state('application', id).state === 'active')
  }

  private createEnrollment(): WriteStep | null {
    const apps = this.activeApplications()
    if (apps.length === 0) return null
    const app = this.random.pick(apps)
    const environment = this.random.pick(this.applicationEnvironments(app))
    // An existing active consumer and usable installation, or new ones the enrollment creates.
    const consumers = this.consumers.filter((id) => this.state('consumer', id).state === 'active')
    const installations = this.installations.filter((id) => this.state('installation', id).state !== 'suspended')
    const consumer = consumers.length > 0 && this.random.chance(0.7) ? this.random.pick(consumers) : this.random.uuid()
    const installation = installations.length > 0 && this.random.chance(0.7) ? this.random.pick(installations) : this.random.uuid()
    const newConsumer = !this.consumers.includes(consumer)
    const newInstallation = !this.installations.includes(installation)
    const taken = this.enrollments.some((id) => {
      const e = this.state('enrollment', id)
      return e.consumer_id === consumer && e.installation_id === installation && e.application_id === app && e.environment === environment
    })
    if (taken) return null
    const id = this.random.uuid()
    const installationDescription = this.description('installation')
    const expected: Fields = {
      installation_id: installation,
      consumer_id: consumer,
      application_id: app,
      environment,
      nickname: `${installation}:${consumer}:${app}:${environment}`,
      active_keyset_id: null,
      client_enclave_key: null,
      state: 'active',
    }
    const implied = (record: (kind: Kind, id: string, fields: Fields) => void) => {
      if (newConsumer) {
        record('consumer', consumer, { state: 'active' })
        this.consumers.push(consumer)
      }
      if (newInstallation) {
        record('installation', installation, { description: installationDescription, state: 'unregistered' })
        this.installations.push(installation)
      }
      this.enrollments.push(id)
    }
    return {
      operation: 'enrollment create',
      method: 'POST',
      path: '/api/enrollments',
      body: { enrollment_id: id, consumer_id: consumer, installation_id: installation, application_id: app, environment, installation_description: installationDescription },
      expect: 201,
      unanswered: () => {
        this.loop.maybe('enrollment', id, expected)
        implied((kind, rid, fields) => this.loop.maybe(kind, rid, fields))
      },
      acknowledged: (body) => {
        const enrollment = body.enrollment as Fields
        for (const [name, value] of Object.entries(expected)) {
          if (!sameValue(enrollment[name], value)) this.loop.reportUnexpected(`enrollment ${id}: answered ${name} ${JSON.stringify(enrollment[name])}, sent ${JSON.stringify(value)}`)
        }
        this.loop.acknowledge('enrollment', id, enrollment)
        // Created with it, in the same transaction: known to exist, their timestamps not shown.
        implied((kind, rid, fields) => {
          this.loop.acknowledge(kind, rid, fields)
          const record = this.loop.get(kind, rid)!
          delete record.acked!.modified
          record.modifiedAfter = null
        })
      },
    }
  }

  private usableEnrollments(filter: (e: Fields) => boolean): string[] {
    return this.enrollments.filter((id) => {
      const e = this.state('enrollment', id)
      return this.state('application', e.application_id as string).state === 'active' && filter(e)
    })
  }

  private toggleEnrollment(): WriteStep | null {
    const ids = this.usableEnrollments(() => true)
    if (ids.length === 0) return null
    const id = this.random.pick(ids)
    const to = this.state('enrollment', id).state === 'active' ? 'suspended' : 'active'
    const verb = to === 'active' ? 'activate' : 'suspend'
    return this.change(`enrollment ${verb}`, 'enrollment', id, 'PATCH', `/api/enrollments/${id}/${verb}`, undefined, { state: to }, 'enrollment')
  }

  private createKeyset(): WriteStep | null {
    const ids = this.usableEnrollments(
      (e) => e.state === 'active' && this.applicationEnvironments(e.application_id as string).includes(e.environment as string),
    )
    if (ids.length === 0) return null
    const id = this.random.pick(ids)
    const enrollment = this.state('enrollment', id)
    const previous = enrollment.active_keyset_id as string | null
    const key = newClientKey()
    return {
      operation: 'keyset create',
      method: 'POST',
      path: `/api/enrollments/${id}/keysets`,
      body: { client_enclave_key: key },
      expect: 201,
      unanswered: () => {
        this.loop.maybe('enrollment', id, { active_keyset_id: ANY, client_enclave_key: key })
        if (previous) this.loop.maybe('keyset', previous, { state: 'retired' })
        this.loop.maybeCreated({
          kind: 'keyset',
          fields: { enrollment_id: id, environment: enrollment.environment, state: 'active' },
          adopt: () => {},
        })
      },
      acknowledged: (body) => {
        const answer = body.enrollment as Fields
        if (answer.client_enclave_key !== key) this.loop.reportUnexpected(`keyset for ${id}: answered key ${answer.client_enclave_key}, sent ${key}`)
        this.loop.acknowledge('enrollment', id, answer)
        if (previous) this.loop.acknowledge('keyset', previous, { state: 'retired' })
        this.loop.acknowledge('keyset', answer.active_keyset_id as string, {
          enrollment_id: id,
          environment: enrollment.environment,
          state: 'active',
          created: answer.modified, // made in the same instant as the enrollment's change
        })
      },
    }
  }

  // Tokens ---------------------------------------------------------------------------------------

  private createToken(): WriteStep {
    const organization_id = this.someOrganization()
    const fields = { organization_id, role: 'viewer', state: 'active' }
    return {
      operation: 'token create',
      method: 'POST',
      path: '/api/tokens',
      body: { organization_id, role: 'viewer', ttl: '1d' },
      expect: 201,
      unanswered: () => this.loop.maybeCreated({ kind: 'token', fields, adopt: (id) => this.tokens.push(id) }),
      acknowledged: (body) => {
        const token = body.token as Fields
        this.loop.acknowledge('token', token.token_id as string, token)
        this.tokens.push(token.token_id as string)
      },
    }
  }

  private revokeToken(): WriteStep | null {
    const active = this.tokens.filter((id) => this.state('token', id).state === 'active')
    if (active.length === 0) return null
    const id = this.random.pick(active)
    return this.change('token revoke', 'token', id, 'PATCH', `/api/tokens/${id}/revoke`, undefined, { state: 'revoked' }, 'token')
  }

  /** A change to one record whose answer (under `field`) shows its new state. */
  private change(operation: string, kind: Kind, id: string, method: string, path: string, body: unknown, effect: Fields, field: string): WriteStep {
    return {
      operation,
      method,
      path,
      ...(body !== undefined ? { body } : {}),
      expect: 200,
      unanswered: () => this.loop.maybe(kind, id, effect),
      acknowledged: (answer) => {
        const record = answer[field] as Fields
        for (const [name, value] of Object.entries(effect)) {
          if (!sameValue(record[name], value)) this.loop.reportUnexpected(`${operation} ${id}: answered ${name} ${JSON.stringify(record[name])}, sent ${JSON.stringify(value)}`)
        }
        this.loop.acknowledge(kind, id, record)
      },
    }
  }
}
