/**
 * One load client: one tenant's records of its own, one request at a time.
 *
 * This file holds what the client knows (its records and what it may still create), its set-up, and
 * the weighted mix it picks its steps from. The steps are built elsewhere: reads.ts (one record),
 * lists.ts, writes.ts, organization-writes.ts and refused-writes.ts; the shapes several of them
 * share are in step-shapes.ts.
 */
import { requestOk } from '../fixtures'
import type { Random } from '../random'
import { getApplicationEnvironments, getKeysets, getOrganizationEnvironments, getOtherTenantRecord, getOwnTenantRecord } from './reads'
import { listApplications, listConsumers, listEnrollments, listInstallations, listOrganizations, listWithOtherTenantIds, vendorList } from './lists'
import { ENROLLMENT_ENVIRONMENTS, type AppModel, type ConsumerModel, type EnrollmentModel, type InstallationModel, type Role, type Step, type Tenant } from './model'
import { organizationWrite } from './organization-writes'
import { crossTenantWrite, forbiddenWrite } from './refused-writes'
import type { LoadRun } from './run'
import {
  changeApplicationEnvironments,
  changeApplicationState,
  changeConsumerState,
  changeEnrollmentState,
  changeInstallationState,
  createApplication,
  createConsumer,
  createEnrollment,
  createInstallation,
  createKeyset,
  setApplicationState,
  updateApplication,
  updateInstallation,
} from './writes'

/** Per client: records it may create over the run (the data set stays small and stops growing). */
const BUDGET = { consumers: 10, installations: 10, enrollments: 16, keysets: 40, applications: 2, partners: 2 }
/** Records each client creates before the load starts, so reads have something to find at once. */
const SEED = { consumers: 3, installations: 3, enrollments: 3 }

/** Builds one step for a client, or null when none fits its records now (then another is picked). */
export type StepBuilder = (client: LoadClient) => Step | null

export class LoadClient {
  /** apps[0] is the client's main application: its enrollments are there. */
  readonly apps: AppModel[] = []
  readonly consumers = new Map<string, ConsumerModel>()
  readonly installations = new Map<string, InstallationModel>()
  readonly enrollments = new Map<string, EnrollmentModel>()
  /** What the client may still create: the steps that create records spend it. */
  readonly budget = { ...BUDGET }
  /** Installation descriptions start with it: a `startswith` search finds exactly this client's. */
  readonly prefix: string
  private counter = 0
  private readonly steps: [weight: number, build: StepBuilder][]
  private readonly totalWeight: number

  constructor(
    readonly run: LoadRun,
    readonly tenant: Tenant,
    readonly number: number,
    readonly random: Random,
  ) {
    this.prefix = `t${tenant.index}c${number} `
    this.steps = [
      // Reads
      [20, getOwnTenantRecord],
      [6, getOtherTenantRecord],
      [5, listConsumers],
      [4, listInstallations],
      [4, listEnrollments],
      [4, listWithOtherTenantIds],
      [2, listOrganizations],
      [2, listApplications],
      [4, getKeysets],
      [2, getOrganizationEnvironments],
      [2, getApplicationEnvironments],
      [2, vendorList],
      // Writes
      [3, createConsumer],
      [4, changeConsumerState],
      [3, createInstallation],
      [2, updateInstallation],
      [3, changeInstallationState],
      [3, createEnrollment],
      [3, changeEnrollmentState],
      [4, createKeyset],
      [2, updateApplication],
      [1, changeApplicationState],
      [1, changeApplicationEnvironments],
      [1, createApplication],
      [2, forbiddenWrite],
      [2, crossTenantWrite],
      // The tenant's organization-level writes: its first client only.
      [number === 0 ? 4 : 0, organizationWrite],
    ]
    this.totalWeight = this.steps.reduce((sum, [weight]) => sum + weight, 0)
  }

  /** Applications whose state is known (the main one always is: its taint is reported, then it stays in use). */
  knownApps(): AppModel[] {
    return this.apps.filter((a, i) => i === 0 || !this.run.uncertain.has(a.id))
  }

  get app(): AppModel {
    return this.apps[0]!
  }

  get customerId(): string {
    return this.tenant.customerId
  }

  /** The environments the client's applications and enrollments use. */
  get appEnvironments(): string[] {
    return this.tenant.envEnabled ? ENROLLMENT_ENVIRONMENTS : ['PRODUCTION']
  }

  /** A description no other record has, starting with this client's prefix. */
  text(what: string): string {
    return `${this.prefix}${what} ${++this.counter}`
  }

  /** Before the load: the main application and a few records, with the customer admin token. */
  async seed(): Promise<void> {
    const token = this.tenant.tokens.admin
    const id = crypto.randomUUID()
    this.run.owner.set(id, this.tenant.index)
    const description = this.text('application')
    const body = await requestOk(this.run.server, 'POST', '/api/applications', {
      application_id: id,
      organization_id: this.customerId,
      description,
      ...(this.tenant.envEnabled ? { allowed_environments: this.appEnvironments.join(',') } : {}),
    }, token)
    if (body.application.application_id !== id) throw new Error(`set-up: application ${id} answered as ${body.application.application_id}`)
    this.apps.push({ id, state: 'active', description, environments: [...this.appEnvironments] })
    for (let i = 0; i < SEED.consumers; i++) {
      const consumer = crypto.randomUUID()
      this.run.owner.set(consumer, this.tenant.index)
      await requestOk(this.run.server, 'POST', '/api/consumers', { consumer_id: consumer }, token)
      this.consumers.set(consumer, { state: 'active' })
    }
    for (let i = 0; i < SEED.installations; i++) {
      const installation = crypto.randomUUID()
      const text = this.text('installation')
      this.run.owner.set(installation, this.tenant.index)
      await requestOk(this.run.server, 'POST', '/api/installations', { installation_id: installation, description: text }, token)
      this.installations.set(installation, { state: 'unregistered', description: text })
    }
    const consumers = [...this.consumers.keys()]
    const installations = [...this.installations.keys()]
    for (let i = 0; i < SEED.enrollments; i++) {
      const enrollment = crypto.randomUUID()
      const environment = this.appEnvironments[i % this.appEnvironments.length]!
      this.run.owner.set(enrollment, this.tenant.index)
      await requestOk(this.run.server, 'POST', '/api/enrollments', {
        enrollment_id: enrollment,
        consumer_id: consumers[i]!,
        installation_id: installations[i]!,
        application_id: this.app.id,
        environment,
        installation_description: this.text('installation'),
      }, token)
      this.enrollments.set(enrollment, { id: enrollment, consumer: consumers[i]!, installation: installations[i]!, app: this.app, environment, state: 'active', keysets: [] })
    }
  }

  /** Makes requests until `until` (performance.now()), or until the run has made `requests` of them. */
  async loop(until: number, requests = Infinity): Promise<void> {
    while (performance.now() < until && this.run.stats.requests < requests) await this.run.execute(this.tenant, this.choose())
  }

  private choose(): Step {
    // A suspended main application is soon activated again: most of the client's enrollment work needs it.
    if (this.app.state === 'suspended' && this.random.chance(0.25)) return setApplicationState(this, this.app, 'active')
    for (;;) {
      let at = this.random.float() * this.totalWeight
      for (const [weight, build] of this.steps) {
        at -= weight
        if (at < 0) {
          const step = build(this)
          if (step) return step
          break
        }
      }
    }
  }

  // Picking at random, for the step builders ---------------------------------------------------

  /** A token that may write tenant data (consumers ... keysets). */
  writer(): Role {
    return this.random.pick(['admin', 'application_admin', 'partner', 'vendor'] as const)
  }

  /** A token that may change applications. */
  appWriter(): Role {
    return this.random.pick(['admin', 'application_admin', 'vendor'] as const)
  }

  /** A token of this tenant that reads everything the customer owns. */
  tenantReader(): Role {
    return this.random.pick(['admin', 'application_admin', 'viewer', 'partner'] as const)
  }

  someClient(tenant: Tenant = this.tenant): LoadClient {
    return this.random.pick(tenant.clients)
  }

  /** A key of `map` whose record's state is known (not tainted by an unexpected answer), or null. */
  pickKey<K>(map: Map<K, unknown>, filter: (key: K) => boolean = () => true): K | null {
    const keys = [...map.keys()].filter((k) => filter(k) && !this.run.uncertain.has(String(k)))
    return keys.length ? this.random.pick(keys) : null
  }
}
