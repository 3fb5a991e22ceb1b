/** One load client: one tenant's records of its own, one request at a time. */
import { newClientKey, type Random } from '../random'
import { ENROLLMENT_ENVIRONMENTS, ORG_ENVIRONMENTS, leak, sortedList, wrong, type AppModel, type Body, type EnrollmentModel, type InstallationState, type Problem, type Role, type Scenario, type Step, type Tenant } from './model'
import type { LoadRun } from './run'

/** Per client: records it may create over the run (the data set stays small and stops growing). */
const BUDGET = { consumers: 10, installations: 10, enrollments: 16, keysets: 40, applications: 2, partners: 2 }
/** Records each client creates before the load starts, so reads have something to find at once. */
const SEED = { consumers: 3, installations: 3, enrollments: 3 }

export class LoadClient {
  /** apps[0] is the client's main application: its enrollments are there. */
  readonly apps: AppModel[] = []
  readonly consumers = new Map<string, { state: 'active' | 'suspended' }>()
  readonly installations = new Map<string, { state: InstallationState; description: string }>()
  readonly enrollments = new Map<string, EnrollmentModel>()
  private readonly budget = { ...BUDGET }
  private counter = 0
  private readonly prefix: string
  private readonly weighted: [number, () => Step | null][]
  private readonly totalWeight: number

  constructor(
    private readonly run: LoadRun,
    private readonly tenant: Tenant,
    readonly number: number,
    private readonly random: Random,
  ) {
    // Installation descriptions start with it: a `startswith` search finds exactly this client's.
    this.prefix = `t${tenant.index}c${number} `
    this.weighted = [
      // Reads
      [20, () => this.getOwnTenantRecord()],
      [6, () => this.getOtherTenantRecord()],
      [5, () => this.listConsumers()],
      [4, () => this.listInstallations()],
      [4, () => this.listEnrollments()],
      [4, () => this.listWithOtherTenantIds()],
      [2, () => this.listOrganizations()],
      [2, () => this.listApplications()],
      [4, () => this.getKeysets()],
      [2, () => this.getOrganizationEnvironments()],
      [2, () => this.getApplicationEnvironments()],
      [2, () => this.vendorList()],
      // Writes
      [3, () => this.createConsumer()],
      [4, () => this.changeConsumerState()],
      [3, () => this.createInstallation()],
      [2, () => this.updateInstallation()],
      [3, () => this.changeInstallationState()],
      [3, () => this.createEnrollment()],
      [3, () => this.changeEnrollmentState()],
      [4, () => this.createKeyset()],
      [2, () => this.updateApplication()],
      [1, () => this.changeApplicationState()],
      [1, () => this.changeApplicationEnvironments()],
      [1, () => this.createApplication()],
      [2, () => this.forbiddenWrite()],
      [2, () => this.crossTenantWrite()],
      // The tenant's organization-level writes: its first client only.
      [number === 0 ? 4 : 0, () => this.organizationWrite()],
    ]
    this.totalWeight = this.weighted.reduce((sum, [w]) => sum + w, 0)
  }

  /** Applications whose state is known (the main one always is: its taint is reported, then it stays in use). */
  knownApps(): AppModel[] {
    return this.apps.filter((a, i) => i === 0 || !this.run.uncertain.has(a.id))
  }

  get app(): AppModel {
    return this.apps[0]!
  }

  private get customerId() {
    return this.tenant.customerId
  }

  private get appEnvironments(): string[] {
    return this.tenant.envEnabled ? ENROLLMENT_ENVIRONMENTS : ['PRODUCTION']
  }

  private text(what: string): string {
    return `${this.prefix}${what} ${++this.counter}`
  }

  /** Before the load: the main application and a few records, with the customer admin token. */
  async seed(): Promise<void> {
    const token = this.tenant.tokens.admin
    const id = crypto.randomUUID()
    this.run.owner.set(id, this.tenant.index)
    const description = this.text('application')
    const body = await this.run.must(token, 'POST', '/api/applications', {
      application_id: id,
      organization_id: this.customerId,
      description,
      ...(this.tenant.envEnabled ? { allowed_environments: this.appEnvironments.join(',') } : {}),
    }, 201)
    if (body.application.application_id !== id) throw new Error(`set-up: application ${id} answered as ${body.application.application_id}`)
    this.apps.push({ id, state: 'active', description, environments: [...this.appEnvironments] })
    for (let i = 0; i < SEED.consumers; i++) {
      const consumer = crypto.randomUUID()
      this.run.owner.set(consumer, this.tenant.index)
      await this.run.must(token, 'POST', '/api/consumers', { consumer_id: consumer }, 201)
      this.consumers.set(consumer, { state: 'active' })
    }
    for (let i = 0; i < SEED.installations; i++) {
      const installation = crypto.randomUUID()
      const text = this.text('installation')
      this.run.owner.set(installation, this.tenant.index)
      await this.run.must(token, 'POST', '/api/installations', { installation_id: installation, description: text }, 201)
      this.installations.set(installation, { state: 'unregistered', description: text })
    }
    const consumers = [...this.consumers.keys()]
    const installations = [...this.installations.keys()]
    for (let i = 0; i < SEED.enrollments; i++) {
      const enrollment = crypto.randomUUID()
      const environment = this.appEnvironments[i % this.appEnvironments.length]!
      this.run.owner.set(enrollment, this.tenant.index)
      await this.run.must(token, 'POST', '/api/enrollments', {
        enrollment_id: enrollment,
        consumer_id: consumers[i]!,
        installation_id: installations[i]!,
        application_id: this.app.id,
        environment,
        installation_description: this.text('installation'),
      }, 201)
      this.enrollments.set(enrollment, { id: enrollment, consumer: consumers[i]!, installation: installations[i]!, app: this.app, environment, state: 'active', keysets: [] })
    }
  }

  async loop(until: number): Promise<void> {
    while (performance.now() < until) await this.run.execute(this.tenant, this.choose())
  }

  private choose(): Step {
    // A suspended main application is soon activated again: most of the client's enrollment work needs it.
    if (this.app.state === 'suspended' && this.random.chance(0.25)) return this.setApplicationState(this.app, 'active', 'normal')
    for (;;) {
      let at = this.random.float() * this.totalWeight
      for (const [weight, make] of this.weighted) {
        at -= weight
        if (at < 0) {
          const step = make()
          if (step) return step
          break
        }
      }
    }
  }

  // Helpers ------------------------------------------------------------------------------------

  /** A token that may write tenant data (consumers ... keysets). */
  private writer(): Role {
    return this.random.pick(['admin', 'application_admin', 'partner', 'vendor'] as const)
  }

  /** A token that may change applications. */
  private appWriter(): Role {
    return this.random.pick(['admin', 'application_admin', 'vendor'] as const)
  }

  /** A token of this tenant that reads everything the customer owns. */
  private tenantReader(): Role {
    return this.random.pick(['admin', 'application_admin', 'viewer', 'partner'] as const)
  }

  private someClient(tenant: Tenant = this.tenant): LoadClient {
    return this.random.pick(tenant.clients)
  }

  private pickKey<K>(map: Map<K, unknown>, filter: (key: K) => boolean = () => true): K | null {
    const keys = [...map.keys()].filter((k) => filter(k) && !this.run.uncertain.has(String(k)))
    return keys.length ? this.random.pick(keys) : null
  }

  /** A known record of another client (any tenant): [path, id]. */
  private recordOf(tenant: Tenant): { kind: 'consumer' | 'installation' | 'application' | 'enrollment'; id: string } | null {
    const client = this.someClient(tenant)
    const kind = this.random.pick(['consumer', 'installation', 'application', 'enrollment'] as const)
    const id =
      kind === 'consumer' ? client.pickKey(client.consumers)
      : kind === 'installation' ? client.pickKey(client.installations)
      : kind === 'enrollment' ? client.pickKey(client.enrollments)
      : this.random.pick(client.apps).id
    return id ? { kind, id } : null
  }

  private listCheck(field: string, q: URLSearchParams, extra?: (items: Body[], body: Body) => Problem | null): (body: Body) => Problem | null {
    return (body) => {
      const items = body[field]
      if (!Array.isArray(items)) return wrong(`no ${field} array`)
      const pageSize = q.has('page_size') ? Number(q.get('page_size')) : 100
      if (items.length > pageSize) return wrong(`${items.length} items, page_size ${pageSize}`)
      return extra?.(items, body) ?? null
    }
  }

  private pagingParams(q: URLSearchParams): void {
    if (this.random.chance(0.5)) q.set('page', String(this.random.int(1, 4)))
    if (this.random.chance(0.7)) q.set('page_size', String(this.random.int(1, 40)))
    if (this.random.chance(0.3)) q.set('order', this.random.pick(['asc', 'desc']))
  }

  /** total/page/page_size as the consumer and enrollment lists answer them. */
  private pagedShape(q: URLSearchParams, items: Body[], body: Body): Problem | null {
    if (!Number.isInteger(body.total) || body.total < items.length) return wrong(`total ${body.total} with ${items.length} items`)
    if (q.has('page') ? body.page !== Number(q.get('page')) : 'page' in body) return wrong(`page ${body.page}, sent ${q.get('page')}`)
    if (body.page_size !== (q.has('page_size') ? Number(q.get('page_size')) : 100)) return wrong(`page_size ${body.page_size}`)
    return null
  }

  private hasTainted(): boolean {
    return [...this.consumers.keys(), ...this.installations.keys(), ...this.enrollments.keys()].some((id) => this.run.uncertain.has(id))
  }

  // Reads --------------------------------------------------------------------------------------

  private getOwnTenantRecord(): Step | null {
    const kind = this.random.pick(['consumer', 'installation', 'application', 'enrollment', 'organization'] as const)
    const role = this.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor', 'vendor_viewer'] as const)
    if (kind === 'organization') {
      const target = this.random.pick([this.customerId, this.tenant.partnerId, this.tenant.togglePartnerId])
      // A partner token reads only its own organization.
      const visible = role !== 'partner' || target === this.tenant.partnerId
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
    if (kind === 'enrollment') {
      // Own ones only: their application's state (suspended: 401) is known.
      const id = this.pickKey(this.enrollments)
      if (!id) return null
      const e = this.enrollments.get(id)!
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
    const client = this.someClient()
    const own = client === this
    if (kind === 'application') {
      const app = this.random.pick(client.apps)
      return {
        kind: 'GET /api/applications/{id}',
        scenario: 'normal',
        role,
        method: 'GET',
        path: `/api/applications/${app.id}`,
        expect: 200,
        check: (b) => {
          const r = b.application
          if (r?.application_id !== app.id || r.organization_id !== this.customerId) return wrong('another application')
          if (own && (r.state !== app.state || r.description !== app.description)) return wrong(`expected ${app.state} "${app.description}"`)
          if (own && this.tenant.envEnabled && r.allowed_environments !== app.environments.join(',')) return wrong(`expected environments ${app.environments}`)
          if (!this.tenant.envEnabled && 'allowed_environments' in r) return wrong('allowed_environments on a customer without environments')
          if ('api_key' in r) return wrong('api_key shown on a read')
          return null
        },
      }
    }
    if (kind === 'consumer') {
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
  private getOtherTenantRecord(): Step | null {
    const other = this.run.otherTenant(this.tenant, this.random)
    const role = this.tenantReader()
    const target = this.random.int(0, 9)
    let kind: string, path: string
    if (target === 0) {
      kind = 'GET /api/organizations/{id}'
      path = `/api/organizations/${this.random.pick([other.customerId, other.partnerId, this.run.vendorId])}`
    } else if (target === 1) {
      kind = 'GET /api/organizations/{id}/environments'
      path = `/api/organizations/${other.customerId}/environments`
    } else {
      const record = this.recordOf(other)
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

  private listConsumers(): Step {
    const role = this.tenantReader()
    const q = new URLSearchParams()
    const byApp = this.random.chance(0.4)
    if (byApp) q.set('application_ids', this.app.id)
    if (this.random.chance(0.3)) q.set('organization_ids', this.customerId)
    if (this.random.chance(0.3)) q.set('state', this.random.pick(['active', 'suspended']))
    const exact = byApp && q.size <= 2 && !this.hasTainted()
    if (!exact) this.pagingParams(q)
    // Exactly the consumers of this client's enrollments in its own application (nobody else enrolls there).
    const expected = new Set([...this.enrollments.values()].filter((e) => e.app === this.app).map((e) => e.consumer))
    return {
      kind: 'GET /api/consumers',
      scenario: 'normal',
      role,
      method: 'GET',
      path: `/api/consumers?${q}`,
      expect: 200,
      check: this.listCheck('consumers', q, (items, body) => {
        const leaked = this.run.checkOwned(this.tenant.index, items.map((c) => c.consumer_id), `consumer list of tenant ${this.tenant.index}`)
        if (leaked) return leaked
        if (q.has('state') && items.some((c) => c.state !== q.get('state'))) return wrong(`a consumer not ${q.get('state')}`)
        if (exact) {
          const want = q.has('state') ? [...expected].filter((id) => this.consumers.get(id)?.state === q.get('state')) : [...expected]
          const got = items.map((c) => c.consumer_id as string)
          if (got.length !== want.length || !got.every((id) => expected.has(id)) || body.total !== want.length) {
            return wrong(`consumers of application ${this.app.id}: ${got.length} (total ${body.total}), expected ${want.length}`)
          }
        }
        return this.pagedShape(q, items, body)
      }),
    }
  }

  private listInstallations(): Step {
    const role = this.tenantReader()
    const q = new URLSearchParams()
    const mine = this.random.chance(0.5)
    if (mine) {
      q.set('installation_description', this.prefix)
      q.set('installation_desc_search_mode', 'startswith')
    }
    const state = this.random.chance(0.3) ? this.random.pick(['active', 'suspended', 'unregistered', 'verified']) : null
    if (state) q.set('state', state)
    const exact = mine && !this.hasTainted() && this.random.chance(0.6)
    if (!exact) {
      if (this.random.chance(0.2)) {
        const consumer = this.pickKey(this.consumers)
        if (consumer) q.set('consumer_ids', consumer)
      }
      this.pagingParams(q)
    }
    const matches = (s: InstallationState) => !state || (state === 'active' ? s !== 'suspended' : s === state)
    const paged = q.has('page')
    return {
      kind: 'GET /api/installations',
      scenario: 'normal',
      role,
      method: 'GET',
      path: `/api/installations?${q}`,
      expect: 200,
      check: this.listCheck('installations', q, (items, body) => {
        const leaked = this.run.checkOwned(this.tenant.index, items.map((i) => i.installation_id), `installation list of tenant ${this.tenant.index}`)
        if (leaked) return leaked
        if (items.some((i) => !matches(i.state))) return wrong(`an installation not ${state}`)
        if (mine && items.some((i) => !String(i.description).startsWith(this.prefix))) return wrong(`a description not starting with "${this.prefix}"`)
        if (paged) {
          if (!Number.isInteger(body.total) || body.total < items.length || body.page !== Number(q.get('page'))) return wrong('paged shape')
        } else if ('total' in body || typeof body.trace_id !== 'string') return wrong('unpaged shape')
        if (exact) {
          const want = [...this.installations].filter(([, m]) => matches(m.state))
          const byId = new Map(items.map((i) => [i.installation_id as string, i]))
          if (byId.size !== want.length) return wrong(`${byId.size} of this client's installations, expected ${want.length}`)
          for (const [id, m] of want) {
            const i = byId.get(id)
            if (!i || i.state !== m.state || i.description !== m.description) return wrong(`installation ${id}: expected ${m.state} "${m.description}"`)
          }
        }
        return null
      }),
    }
  }

  private listEnrollments(): Step {
    const role = this.tenantReader()
    const q = new URLSearchParams()
    const byApp = this.random.chance(0.5)
    if (byApp) q.set('application_ids', this.app.id)
    const environment = this.random.chance(0.3) ? this.random.pick(this.appEnvironments) : null
    if (environment) q.set('environment', environment)
    const state = this.random.chance(0.3) ? this.random.pick(['active', 'suspended'] as const) : null
    if (state) q.set('state', state)
    const exact = byApp && !this.hasTainted() && this.random.chance(0.6)
    if (!exact) this.pagingParams(q)
    return {
      kind: 'GET /api/enrollments',
      scenario: 'normal',
      role,
      method: 'GET',
      path: `/api/enrollments?${q}`,
      expect: 200,
      check: this.listCheck('enrollments', q, (items, body) => {
        const where = `enrollment list of tenant ${this.tenant.index}`
        const leaked =
          this.run.checkOwned(this.tenant.index, items.map((e) => e.enrollment_id), where) ??
          this.run.checkOwned(this.tenant.index, items.flatMap((e) => [e.application_id, e.consumer_id, e.installation_id]), where)
        if (leaked) return leaked
        if (environment && items.some((e) => e.environment !== environment)) return wrong(`an enrollment not in ${environment}`)
        if (state && items.some((e) => e.state !== state)) return wrong(`an enrollment not ${state}`)
        if (byApp && items.some((e) => e.application_id !== this.app.id)) return wrong('an enrollment of another application')
        if (exact) {
          const want = [...this.enrollments.values()].filter((e) => e.app === this.app && (!environment || e.environment === environment) && (!state || e.state === state))
          const byId = new Map(items.map((e) => [e.enrollment_id as string, e]))
          if (byId.size !== want.length || body.total !== want.length) return wrong(`${byId.size} (total ${body.total}) of this client's enrollments, expected ${want.length}`)
          for (const m of want) {
            const e = byId.get(m.id)
            if (!e || e.state !== m.state || e.active_keyset_id !== (m.keysets[m.keysets.length - 1] ?? null)) return wrong(`enrollment ${m.id}: expected ${m.state}`)
          }
        }
        return this.pagedShape(q, items, body)
      }),
    }
  }

  /** A list filtered by another tenant's ids: 200 and nothing. */
  private listWithOtherTenantIds(): Step | null {
    const other = this.run.otherTenant(this.tenant, this.random)
    const client = this.someClient(other)
    const list = this.random.pick(['consumers', 'installations', 'enrollments'] as const)
    const filter = this.random.pick(['organization_ids', 'consumer_ids', 'installation_ids', 'application_ids', 'enrollment_ids'] as const)
    const id =
      filter === 'organization_ids' ? other.customerId
      : filter === 'consumer_ids' ? client.pickKey(client.consumers)
      : filter === 'installation_ids' ? client.pickKey(client.installations)
      : filter === 'application_ids' ? client.app.id
      : client.pickKey(client.enrollments)
    if (!id) return null
    const q = new URLSearchParams({ [filter]: id })
    // Sometimes beside one of this tenant's own ids: the other tenant's still matches nothing.
    if (this.random.chance(0.3) && filter === 'application_ids') q.append('application_ids', this.app.id)
    const alone = q.getAll(filter).length === 1
    if (this.random.chance(0.5)) q.set('page', '1')
    return {
      kind: `GET /api/${list}`,
      scenario: 'cross-tenant',
      role: this.tenantReader(),
      method: 'GET',
      path: `/api/${list}?${q}`,
      expect: 200,
      check: (body) => {
        const items = body[list]
        if (!Array.isArray(items)) return wrong(`no ${list} array`)
        const ids = items.map((r: Body) => r[`${list.slice(0, -1)}_id`] as string)
        const leaked = this.run.checkOwned(this.tenant.index, ids, `${list} list of tenant ${this.tenant.index} filtered by tenant ${other.index}'s ${filter}`)
        if (leaked) return leaked
        if (alone && items.length > 0) return leak(`${items.length} records for another tenant's ${filter}`)
        if (alone && 'total' in body && body.total !== 0) return leak(`total ${body.total} for another tenant's ${filter}`)
        return null
      },
    }
  }

  private listOrganizations(): Step {
    const role = this.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor_viewer'] as const)
    const mine = [this.customerId, this.tenant.partnerId, this.tenant.togglePartnerId]
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
          return this.run.tenants.every((t) => ids.includes(t.customerId)) && ids.includes(this.run.vendorId) ? null : wrong('the vendor misses organizations')
        }
        if (role === 'partner') return ids.length === 1 && ids[0] === this.tenant.partnerId ? null : leak(`a partner sees ${ids.length} organizations`)
        const leaked = this.run.checkOwned(this.tenant.index, ids, `organization list of tenant ${this.tenant.index}`)
        if (leaked) return leaked
        return mine.every((id) => ids.includes(id)) ? null : wrong('the customer misses its own organizations')
      },
    }
  }

  private listApplications(): Step {
    const role = this.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor'] as const)
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
        if (!this.knownApps().every((a) => ids.includes(a.id))) return wrong("the list misses this client's applications")
        if (role === 'vendor') return null
        return this.run.checkOwned(this.tenant.index, ids, `application list of tenant ${this.tenant.index}`) ??
          (apps.some((a) => a.organization_id !== this.customerId) ? leak('an application of another customer') : null)
      },
    }
  }

  private getKeysets(): Step | null {
    const id = this.pickKey(this.enrollments)
    if (!id) return null
    const e = this.enrollments.get(id)!
    const active = e.app.state === 'active'
    return {
      kind: 'GET /api/enrollments/{id}/keysets',
      scenario: active ? 'normal' : 'suspended-app',
      role: this.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor_viewer'] as const),
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

  private getOrganizationEnvironments(): Step {
    const role = this.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor'] as const)
    const found = this.tenant.envEnabled && role !== 'partner'
    return {
      kind: 'GET /api/organizations/{id}/environments',
      scenario: found ? 'normal' : role === 'partner' ? 'out-of-scope' : 'not-enabled',
      role,
      method: 'GET',
      path: `/api/organizations/${this.customerId}/environments`,
      expect: found ? 200 : 404,
      check: (body) => {
        // Its first client changes them meanwhile: only what always holds.
        const supported = String(body.supported).split(',')
        if (body.organization_id !== this.customerId) return wrong('another organization')
        if (!ORG_ENVIRONMENTS.split(',').every((n) => supported.includes(n)) || !supported.includes(body.default)) return wrong('environments')
        return supported.join(',') === [...supported].sort().join(',') ? null : wrong('not sorted')
      },
    }
  }

  private getApplicationEnvironments(): Step {
    const app = this.random.pick(this.knownApps())
    return {
      kind: 'GET /api/environments/{id}',
      scenario: this.tenant.envEnabled ? 'normal' : 'not-enabled',
      role: this.random.pick(['admin', 'application_admin', 'viewer', 'partner', 'vendor_viewer'] as const),
      method: 'GET',
      path: `/api/environments/${app.id}`,
      expect: this.tenant.envEnabled ? 200 : 404,
      check: (body) => (body.application_id === app.id && body.environments === app.environments.join(',') ? null : wrong(`expected ${app.environments}`)),
    }
  }

  /** The vendor lists one customer's records: all of them that customer's. */
  private vendorList(): Step {
    const tenant = this.random.pick(this.run.tenants)
    const list = this.random.pick(['consumers', 'installations', 'enrollments'] as const)
    const q = new URLSearchParams({ organization_ids: tenant.customerId, page: String(this.random.int(1, 3)), page_size: String(this.random.int(10, 100)) })
    return {
      kind: `GET /api/${list}`,
      scenario: 'normal',
      role: this.random.pick(['vendor', 'vendor_viewer'] as const),
      method: 'GET',
      path: `/api/${list}?${q}`,
      expect: 200,
      check: this.listCheck(list, q, (items) =>
        this.run.checkOwned(tenant.index, items.map((r) => r[`${list.slice(0, -1)}_id`] as string), `vendor's ${list} list of tenant ${tenant.index}`),
      ),
    }
  }

  // Writes: consumers and installations --------------------------------------------------------

  private createConsumer(): Step | null {
    const role = this.writer()
    const named = role === 'vendor' || this.random.chance(0.3) ? { organization_id: this.customerId } : {}
    if (this.random.chance(0.12)) {
      // Another customer's consumer id: 409, and nothing changes.
      const other = this.someClient(this.run.otherTenant(this.tenant, this.random))
      const id = other.pickKey(other.consumers)
      if (!id) return null
      return { kind: 'POST /api/consumers', scenario: 'conflict', role, method: 'POST', path: '/api/consumers', body: { consumer_id: id, ...named }, expect: 409 }
    }
    if (this.budget.consumers > 0) {
      this.budget.consumers--
      const id = crypto.randomUUID()
      this.run.owner.set(id, this.tenant.index)
      return {
        kind: 'POST /api/consumers',
        scenario: 'normal',
        role,
        method: 'POST',
        path: '/api/consumers',
        body: { consumer_id: id, ...named },
        expect: 201,
        check: (b) => (b.consumer?.consumer_id === id && b.consumer.state === 'active' ? null : wrong('not the new consumer')),
        done: () => {
          this.consumers.set(id, { state: 'active' })
          this.run.noteCreated()
        },
        taint: () => this.run.uncertain.add(id),
      }
    }
    // The same id again: the existing record, unchanged.
    const id = this.pickKey(this.consumers)
    if (!id) return null
    const model = this.consumers.get(id)!
    return {
      kind: 'POST /api/consumers',
      scenario: 'normal',
      role,
      method: 'POST',
      path: '/api/consumers',
      body: { consumer_id: id, ...named },
      expect: 200,
      check: (b) => (b.consumer?.consumer_id === id && b.consumer.state === model.state ? null : wrong(`expected the existing consumer, ${model.state}`)),
      taint: () => this.run.uncertain.add(id),
    }
  }

  private changeConsumerState(): Step | null {
    const id = this.pickKey(this.consumers)
    if (!id) return null
    const model = this.consumers.get(id)!
    const noOp = this.random.chance(0.12)
    const to = noOp ? model.state : model.state === 'active' ? 'suspended' : 'active'
    const verb = to === 'active' ? 'activate' : 'suspend'
    return {
      kind: 'PATCH /api/consumers/{id}/{action}',
      scenario: noOp ? 'conflict' : 'normal',
      role: this.writer(),
      method: 'PATCH',
      path: `/api/consumers/${id}/${verb}`,
      expect: noOp ? 409 : 200,
      check: (b) => (b.consumer?.consumer_id === id && b.consumer.state === to ? null : wrong(`expected ${to}`)),
      done: () => (model.state = to),
      taint: () => this.run.uncertain.add(id),
    }
  }

  private createInstallation(): Step | null {
    const role = this.writer()
    const named = role === 'vendor' || this.random.chance(0.3) ? { organization_id: this.customerId } : {}
    const description = this.text('installation')
    if (this.random.chance(0.12)) {
      const other = this.someClient(this.run.otherTenant(this.tenant, this.random))
      const id = other.pickKey(other.installations)
      if (!id) return null
      return { kind: 'POST /api/installations', scenario: 'conflict', role, method: 'POST', path: '/api/installations', body: { installation_id: id, description, ...named }, expect: 409 }
    }
    if (this.budget.installations > 0) {
      this.budget.installations--
      const id = crypto.randomUUID()
      this.run.owner.set(id, this.tenant.index)
      return {
        kind: 'POST /api/installations',
        scenario: 'normal',
        role,
        method: 'POST',
        path: '/api/installations',
        body: { installation_id: id, description, ...named },
        expect: 201,
        check: (b) => (b.installation?.installation_id === id && b.installation.state === 'unregistered' && b.installation.description === description ? null : wrong('not the new installation')),
        done: () => {
          this.installations.set(id, { state: 'unregistered', description })
          this.run.noteCreated()
        },
        taint: () => this.run.uncertain.add(id),
      }
    }
    const id = this.pickKey(this.installations)
    if (!id) return null
    const model = this.installations.get(id)!
    return {
      kind: 'POST /api/installations',
      scenario: 'normal',
      role,
      method: 'POST',
      path: '/api/installations',
      body: { installation_id: id, description, ...named },
      expect: 200,
      // The existing record, unchanged: not the description sent now.
      check: (b) => (b.installation?.installation_id === id && b.installation.state === model.state && b.installation.description === model.description ? null : wrong(`expected the existing installation, ${model.state} "${model.description}"`)),
      taint: () => this.run.uncertain.add(id),
    }
  }

  private updateInstallation(): Step | null {
    const id = this.pickKey(this.installations)
    if (!id) return null
    const model = this.installations.get(id)!
    const description = this.text('installation')
    return {
      kind: 'PATCH /api/installations/{id}',
      scenario: 'normal',
      role: this.writer(),
      method: 'PATCH',
      path: `/api/installations/${id}`,
      body: { description },
      expect: 200,
      check: (b) => (b.installation?.description === description && b.installation.state === model.state ? null : wrong(`expected ${model.state} "${description}"`)),
      done: () => (model.description = description),
      taint: () => this.run.uncertain.add(id),
    }
  }

  private changeInstallationState(): Step | null {
    const id = this.pickKey(this.installations)
    if (!id) return null
    const model = this.installations.get(id)!
    // Suspend from unregistered or verified; verify from unregistered or suspended; the others are no-ops (409).
    const verb = this.random.pick(['suspend', 'verify'] as const)
    const to: InstallationState = verb === 'suspend' ? 'suspended' : 'verified'
    const noOp = model.state === to
    if (noOp && !this.random.chance(0.25)) return null // keep deliberate no-ops to a fraction
    return {
      kind: 'PATCH /api/installations/{id}/{action}',
      scenario: noOp ? 'conflict' : 'normal',
      role: this.writer(),
      method: 'PATCH',
      path: `/api/installations/${id}/${verb}`,
      expect: noOp ? 409 : 200,
      check: (b) => (b.installation?.state === to ? null : wrong(`expected ${to}`)),
      done: () => (model.state = to),
      taint: () => this.run.uncertain.add(id),
    }
  }

  // Writes: enrollments and keysets ------------------------------------------------------------

  private createEnrollment(): Step | null {
    const role = this.writer()
    const app = this.app
    const description = this.text('installation')
    const existing = this.pickKey(this.enrollments)
    const roll = this.random.float()
    if (app.state === 'suspended') {
      // The application's customer deactivated it: 401, nothing created.
      return {
        kind: 'POST /api/enrollments',
        scenario: 'suspended-app',
        role,
        method: 'POST',
        path: '/api/enrollments',
        body: { enrollment_id: crypto.randomUUID(), consumer_id: crypto.randomUUID(), installation_id: crypto.randomUUID(), application_id: app.id, environment: this.appEnvironments[0], installation_description: description },
        expect: 401,
      }
    }
    if (existing && roll < 0.15) {
      // The same enrollment again: the existing record.
      const e = this.enrollments.get(existing)!
      return {
        kind: 'POST /api/enrollments',
        scenario: 'normal',
        role,
        method: 'POST',
        path: '/api/enrollments',
        body: { enrollment_id: e.id, consumer_id: e.consumer, installation_id: e.installation, application_id: e.app.id, environment: e.environment, installation_description: description },
        expect: 200,
        check: (b) => (b.enrollment?.enrollment_id === e.id && b.enrollment.state === e.state && b.enrollment.active_keyset_id === (e.keysets[e.keysets.length - 1] ?? null) ? null : wrong(`expected the existing enrollment, ${e.state}`)),
        taint: () => this.run.uncertain.add(e.id),
      }
    }
    if (existing && roll < 0.22) {
      // The same enrollment_id claimed with another consumer (SPEC.md's compromised client): 400.
      const e = this.enrollments.get(existing)!
      return {
        kind: 'POST /api/enrollments',
        scenario: 'conflict',
        role,
        method: 'POST',
        path: '/api/enrollments',
        body: { enrollment_id: e.id, consumer_id: crypto.randomUUID(), installation_id: e.installation, application_id: e.app.id, environment: e.environment, installation_description: description },
        expect: 400,
      }
    }
    const suspendedConsumer = this.pickKey(this.consumers, (id) => this.consumers.get(id)!.state === 'suspended')
    const usableInstallation = this.pickKey(this.installations, (id) => this.installations.get(id)!.state !== 'suspended')
    if (suspendedConsumer && usableInstallation && roll < 0.3) {
      // Enrolling a suspended consumer: 409 (an existing tuple would be 409 as well).
      return {
        kind: 'POST /api/enrollments',
        scenario: 'conflict',
        role,
        method: 'POST',
        path: '/api/enrollments',
        body: { enrollment_id: crypto.randomUUID(), consumer_id: suspendedConsumer, installation_id: usableInstallation, application_id: app.id, environment: this.random.pick(this.appEnvironments), installation_description: description },
        expect: 409,
      }
    }
    if (this.budget.enrollments <= 0) return null
    const environment = this.random.pick(this.appEnvironments)
    const activeConsumer = this.pickKey(this.consumers, (id) => this.consumers.get(id)!.state === 'active')
    const newConsumer = !activeConsumer || (this.budget.consumers > 0 && this.random.chance(0.3))
    const newInstallation = !usableInstallation || (this.budget.installations > 0 && this.random.chance(0.3))
    if ((newConsumer && this.budget.consumers <= 0) || (newInstallation && this.budget.installations <= 0)) return null
    const consumer = newConsumer ? crypto.randomUUID() : activeConsumer!
    const installation = newInstallation ? crypto.randomUUID() : usableInstallation!
    const taken = [...this.enrollments.values()].some((e) => e.consumer === consumer && e.installation === installation && e.app === app && e.environment === environment)
    if (taken) return null
    this.budget.enrollments--
    if (newConsumer) this.budget.consumers--
    if (newInstallation) this.budget.installations--
    const id = crypto.randomUUID()
    for (const created of [id, ...(newConsumer ? [consumer] : []), ...(newInstallation ? [installation] : [])]) this.run.owner.set(created, this.tenant.index)
    return {
      kind: 'POST /api/enrollments',
      scenario: 'normal',
      role,
      method: 'POST',
      path: '/api/enrollments',
      body: { enrollment_id: id, consumer_id: consumer, installation_id: installation, application_id: app.id, environment, installation_description: description },
      expect: 201,
      check: (b) => {
        const r = b.enrollment
        if (r?.enrollment_id !== id || r.consumer_id !== consumer || r.installation_id !== installation || r.application_id !== app.id || r.environment !== environment) return wrong('not the enrollment sent')
        if (r.state !== 'active' || r.active_keyset_id !== null || r.client_enclave_key !== null || r.client_storage_key_shares !== null) return wrong('not a new enrollment')
        return r.nickname === `${installation}:${consumer}:${app.id}:${environment}` ? null : wrong('nickname')
      },
      done: () => {
        this.enrollments.set(id, { id, consumer, installation, app, environment, state: 'active', keysets: [] })
        this.run.noteCreated()
        if (newConsumer) {
          this.consumers.set(consumer, { state: 'active' })
          this.run.noteCreated()
        }
        if (newInstallation) {
          this.installations.set(installation, { state: 'unregistered', description })
          this.run.noteCreated()
        }
      },
      taint: () => {
        for (const created of [id, consumer, installation]) this.run.uncertain.add(created)
      },
    }
  }

  private changeEnrollmentState(): Step | null {
    const id = this.pickKey(this.enrollments)
    if (!id) return null
    const e = this.enrollments.get(id)!
    const noOp = this.random.chance(0.12)
    const to = noOp ? e.state : e.state === 'active' ? 'suspended' : 'active'
    const verb = to === 'active' ? 'activate' : 'suspend'
    const appActive = e.app.state === 'active'
    return {
      kind: 'PATCH /api/enrollments/{id}/{action}',
      scenario: !appActive ? 'suspended-app' : noOp ? 'conflict' : 'normal',
      role: this.writer(),
      method: 'PATCH',
      path: `/api/enrollments/${id}/${verb}`,
      expect: !appActive ? 401 : noOp ? 409 : 200,
      check: (b) => (b.enrollment?.enrollment_id === id && b.enrollment.state === to ? null : wrong(`expected ${to}`)),
      done: () => (e.state = to),
      taint: () => this.run.uncertain.add(id),
    }
  }

  private createKeyset(): Step | null {
    const suspended = this.pickKey(this.enrollments, (id) => this.enrollments.get(id)!.state === 'suspended')
    const active = this.pickKey(this.enrollments, (id) => this.enrollments.get(id)!.state === 'active')
    // Sometimes a suspended enrollment on purpose (409); once the budget is spent, only those.
    const probe = suspended !== null && this.random.chance(this.budget.keysets > 0 ? 0.1 : 0.2)
    const id = probe ? suspended : this.budget.keysets > 0 ? active : null
    if (!id) return null
    const e = this.enrollments.get(id)!
    const key = newClientKey()
    const appActive = e.app.state === 'active'
    const creates = appActive && !probe
    if (creates) this.budget.keysets--
    const previous = e.keysets[e.keysets.length - 1] ?? null
    return {
      kind: 'POST /api/enrollments/{id}/keysets',
      scenario: !appActive ? 'suspended-app' : probe ? 'conflict' : 'normal',
      role: this.writer(),
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
        this.run.owner.set(b.enrollment.active_keyset_id, this.tenant.index)
        this.run.noteCreated()
      },
      taint: () => this.run.uncertain.add(id),
    }
  }

  // Writes: applications -----------------------------------------------------------------------

  private updateApplication(): Step {
    const app = this.random.pick(this.knownApps())
    const description = this.text('application')
    return {
      kind: 'PATCH /api/applications/{id}',
      scenario: 'normal',
      role: this.appWriter(),
      method: 'PATCH',
      path: `/api/applications/${app.id}`,
      body: { description },
      expect: 200,
      check: (b) => (b.application?.description === description && b.application.state === app.state ? null : wrong(`expected ${app.state} "${description}"`)),
      done: () => (app.description = description),
      taint: () => this.run.uncertain.add(app.id),
    }
  }

  private changeApplicationState(): Step {
    const app = this.random.pick(this.knownApps())
    if (this.random.chance(0.1)) return this.setApplicationState(app, app.state, 'conflict')
    return this.setApplicationState(app, app.state === 'active' ? 'suspended' : 'active', 'normal')
  }

  private setApplicationState(app: AppModel, to: AppModel['state'], scenario: Scenario): Step {
    const noOp = app.state === to
    return {
      kind: 'PATCH /api/applications/{id}/{action}',
      scenario,
      role: this.appWriter(),
      method: 'PATCH',
      path: `/api/applications/${app.id}/${to === 'active' ? 'activate' : 'suspend'}`,
      expect: noOp ? 409 : 200,
      check: (b) => (b.application?.application_id === app.id && b.application.state === to ? null : wrong(`expected ${to}`)),
      done: () => (app.state = to),
      // The state is needed for everything else: read it back.
      taint: () => this.run.uncertain.add(app.id),
    }
  }

  private changeApplicationEnvironments(): Step {
    const app = this.app
    const role = this.appWriter()
    if (!this.tenant.envEnabled) {
      return { kind: 'POST /api/environments/{id}', scenario: 'not-enabled', role, method: 'POST', path: `/api/environments/${app.id}`, body: { environment: 'DEV' }, expect: 404 }
    }
    const has = app.environments.includes('DEV')
    const noOp = this.random.chance(0.1)
    // Toggle DEV (never used by enrollments, so never has keysets). A no-op: add it again (409) or remove it while absent (404).
    const add = noOp ? has : !has
    const next = add ? sortedList([...app.environments, 'DEV']) : app.environments.filter((n) => n !== 'DEV').join(',')
    return {
      kind: `${add ? 'POST' : 'DELETE'} /api/environments/{id}`,
      scenario: noOp ? 'conflict' : 'normal',
      role,
      method: add ? 'POST' : 'DELETE',
      path: `/api/environments/${app.id}`,
      body: { environment: this.random.chance(0.5) ? 'dev' : 'DEV' },
      expect: noOp ? (add ? 409 : 404) : 200,
      check: (b) => (b.application_id === app.id && b.environments === next ? null : wrong(`expected ${next}`)),
      done: () => (app.environments = next.split(',')),
      taint: () => this.run.uncertain.add(app.id),
    }
  }

  private createApplication(): Step | null {
    if (this.budget.applications <= 0) return null
    this.budget.applications--
    const id = crypto.randomUUID()
    this.run.owner.set(id, this.tenant.index)
    const description = this.text('application')
    const environments = this.tenant.envEnabled ? this.random.subset(ENROLLMENT_ENVIRONMENTS).sort() : ['PRODUCTION']
    return {
      kind: 'POST /api/applications',
      scenario: 'normal',
      role: this.random.pick(['admin', 'application_admin', 'vendor'] as const),
      method: 'POST',
      path: '/api/applications',
      body: { application_id: id, organization_id: this.customerId, description, ...(this.tenant.envEnabled ? { allowed_environments: environments.join(',') } : {}) },
      expect: 201,
      check: (b) => {
        const a = b.application
        if (a?.application_id !== id || a.organization_id !== this.customerId || a.state !== 'active' || a.description !== description) return wrong('not the application sent')
        if ((a.allowed_environments ?? 'PRODUCTION') !== environments.join(',')) return wrong(`environments ${a.allowed_environments}`)
        return typeof a.api_key === 'string' && typeof a.host_url === 'string' ? null : wrong('no client configuration')
      },
      done: () => {
        this.apps.push({ id, state: 'active', description, environments })
        this.run.noteCreated()
      },
      taint: () => this.run.uncertain.add(id),
    }
  }

  // Refused writes -----------------------------------------------------------------------------

  /** A write this tenant's token may not make: 403 (or 404 where the record is out of the token's scope). */
  private forbiddenWrite(): Step | null {
    const consumer = this.pickKey(this.consumers)
    const choice = this.random.int(0, 7)
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
        return consumer ? step('PATCH /api/consumers/{id}/{action}', 'viewer', 'PATCH', `/api/consumers/${consumer}/${this.consumers.get(consumer)!.state === 'active' ? 'suspend' : 'activate'}`, undefined) : null
      case 1:
        return step('POST /api/consumers', this.random.pick(['viewer', 'vendor_viewer'] as const), 'POST', '/api/consumers', { consumer_id: crypto.randomUUID(), organization_id: this.customerId })
      case 2:
        return step('POST /api/organizations', 'application_admin', 'POST', '/api/organizations', { description: this.text('partner') })
      case 3:
        return step('POST /api/applications', 'partner', 'POST', '/api/applications', { organization_id: this.customerId, description: this.text('application') })
      case 4:
        return step('PATCH /api/applications/{id}', 'viewer', 'PATCH', `/api/applications/${this.app.id}`, { description: this.text('application') })
      case 5:
        return step('PATCH /api/organizations/{id}', this.random.pick(['application_admin', 'viewer'] as const), 'PATCH', `/api/organizations/${this.customerId}`, { description: this.text('customer') })
      case 6:
        // A customer may not suspend itself (only the vendor suspends customers).
        return step('PATCH /api/organizations/{id}/{action}', 'admin', 'PATCH', `/api/organizations/${this.customerId}/suspend`, undefined)
      default:
        // Organization environments are out of a partner's scope: 404.
        return step('PATCH /api/organizations/{id}/environments', 'partner', 'PATCH', `/api/organizations/${this.customerId}/environments`, { environment: 'SCRATCH' }, 404)
    }
  }

  /** A write to another tenant's record with this tenant's token: 404, and nothing changes. */
  private crossTenantWrite(): Step | null {
    const other = this.run.otherTenant(this.tenant, this.random)
    const client = this.someClient(other)
    const role = this.random.pick(['admin', 'application_admin', 'partner'] as const)
    const step = (kind: string, method: string, path: string, body?: unknown): Step => ({ kind, scenario: 'cross-tenant', role, method, path, ...(body !== undefined ? { body } : {}), expect: 404 })
    const consumer = client.pickKey(client.consumers)
    const installation = client.pickKey(client.installations)
    const enrollment = client.pickKey(client.enrollments)
    switch (this.random.int(0, 9)) {
      case 0:
        return consumer ? step('PATCH /api/consumers/{id}/{action}', 'PATCH', `/api/consumers/${consumer}/${this.random.pick(['suspend', 'activate'])}`) : null
      case 1:
        return installation ? step('PATCH /api/installations/{id}', 'PATCH', `/api/installations/${installation}`, { description: this.text('stolen') }) : null
      case 2:
        return installation ? step('PATCH /api/installations/{id}/{action}', 'PATCH', `/api/installations/${installation}/${this.random.pick(['suspend', 'verify'])}`) : null
      case 3:
        return step('PATCH /api/applications/{id}/{action}', 'PATCH', `/api/applications/${client.app.id}/${this.random.pick(['suspend', 'activate'])}`)
      case 4:
        return step('POST /api/enrollments', 'POST', '/api/enrollments', {
          enrollment_id: crypto.randomUUID(),
          consumer_id: crypto.randomUUID(),
          installation_id: crypto.randomUUID(),
          application_id: client.app.id,
          environment: other.envEnabled ? 'PROD' : 'PRODUCTION',
          installation_description: this.text('stolen'),
        })
      case 5:
        return enrollment ? step('POST /api/enrollments/{id}/keysets', 'POST', `/api/enrollments/${enrollment}/keysets`, { client_enclave_key: newClientKey() }) : null
      case 6:
        return enrollment ? step('PATCH /api/enrollments/{id}/{action}', 'PATCH', `/api/enrollments/${enrollment}/${this.random.pick(['suspend', 'activate'])}`) : null
      case 7:
        return step('PATCH /api/organizations/{id}', 'PATCH', `/api/organizations/${this.random.pick([other.customerId, other.togglePartnerId])}`, { description: this.text('stolen') })
      case 8:
        return step('POST /api/environments/{id}', 'POST', `/api/environments/${client.app.id}`, { environment: 'DEV' })
      default:
        // A body naming another tenant's customer.
        return step('POST /api/consumers', 'POST', '/api/consumers', { consumer_id: crypto.randomUUID(), organization_id: other.customerId })
    }
  }

  // Organization-level writes (the tenant's first client) --------------------------------------

  private organizationWrite(): Step | null {
    const tenant = this.tenant
    const role = this.random.pick(['admin', 'vendor'] as const)
    switch (this.random.int(0, 5)) {
      case 0: {
        const description = `tenant ${tenant.index} ${this.text('customer')}`
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
      case 1: {
        const noOp = this.random.chance(0.12)
        const to = noOp ? tenant.togglePartnerState : tenant.togglePartnerState === 'active' ? 'suspended' : 'active'
        return {
          kind: 'PATCH /api/organizations/{id}/{action}',
          scenario: noOp ? 'conflict' : 'normal',
          role,
          method: 'PATCH',
          path: `/api/organizations/${tenant.togglePartnerId}/${to === 'active' ? 'activate' : 'suspend'}`,
          expect: noOp ? 409 : 200,
          check: (b) => (b.organization?.state === to && b.organization.parent_id === tenant.customerId ? null : wrong(`expected ${to}`)),
          done: () => (tenant.togglePartnerState = to),
        }
      }
      case 2: {
        if (this.budget.partners <= 0) return null
        this.budget.partners--
        const description = this.text('partner')
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
            this.run.owner.set(b.organization.organization_id, tenant.index)
            tenant.newPartners.push(b.organization.organization_id)
            this.run.noteCreated()
          },
        }
      }
      default: {
        if (!tenant.envEnabled) {
          return { kind: 'PATCH /api/organizations/{id}/environments', scenario: 'not-enabled', role, method: 'PATCH', path: `/api/organizations/${tenant.customerId}/environments`, body: { environment: 'SCRATCH' }, expect: 404 }
        }
        const path = `/api/organizations/${tenant.customerId}/environments`
        const supported = (scratch: boolean) => sortedList([...ORG_ENVIRONMENTS.split(','), ...(scratch ? ['SCRATCH'] : [])])
        const pick = this.random.int(0, 9)
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
        const add = noOp ? tenant.scratch : !tenant.scratch
        const next = noOp ? tenant.scratch : !tenant.scratch
        return {
          kind: `${add ? 'PATCH' : 'DELETE'} /api/organizations/{id}/environments`,
          scenario: noOp ? 'conflict' : 'normal',
          role,
          method: add ? 'PATCH' : 'DELETE',
          path,
          body: { environment: 'scratch' },
          // Adding one already there: 409; removing one not there: 404.
          expect: noOp ? (add ? 409 : 404) : 200,
          check: (b) => (b.application_id === tenant.customerId && b.supported === supported(next) && b.default === tenant.defaultEnvironment ? null : wrong(`expected ${supported(next)}`)),
          done: () => (tenant.scratch = next),
        }
      }
    }
  }
}
