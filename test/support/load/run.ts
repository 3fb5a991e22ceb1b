/** The load run: the server, the tenants and their tokens, the clients for a fixed time beside the samplers, the final read-back. */
import { readdirSync } from 'node:fs'
import { mapLimited } from '../map-limited'
import { Random } from '../random'
import { requestOk } from '../fixtures'
import { api, httpCaller, initLine, keywardCommand, run, startServer, stopServer, type HttpAnswer } from '../server-process'
import { LoadClient } from './client'
import { cpuCounters, machineSecond, type MachineSecond } from './machine'
import { analyseMemory, auditEventCount, vmRss, type MemorySample } from './memory'
import { ORG_ENVIRONMENTS, leak, sortedList, wrong, type Body, type EnrollmentModel, type Problem, type Role, type Step, type Tenant } from './model'
import type { LoadOptions } from './options'
import type { LoadReport } from './report'
import { Stats } from './stats'

/** What the server always writes on stderr (its info lines: start, requests, graceful stop): not reported. */
const BENIGN_STDERR = [/^\{"time":"[^"]+","level":"info",/]

export class LoadRun {
  readonly random: Random
  readonly seed: number
  readonly stats = new Stats()
  readonly log: (line: string) => void
  readonly tenants: Tenant[] = []
  /** Which tenant each known id belongs to (-1: the vendor). Ids the clients choose are entered before they are sent. */
  readonly owner = new Map<string, number>()
  /** Ids seen in a tenant's answer that were not known yet: checked at the end. */
  private readonly unknownSeen: { tenant: number; id: string; where: string }[] = []
  /** Ids whose existence or state is unknown after an unexpected answer: left out of the final comparison. */
  readonly uncertain = new Set<string>()
  /** Creation times (ms since the load started) of records created during the load. */
  readonly createdAt: number[] = []
  url = ''
  vendorId = ''
  vendorTokens = { vendor: '', vendor_viewer: '' }
  loadStartedAt = 0

  constructor(private readonly options: LoadOptions) {
    this.seed = options.seed ?? Math.floor(Math.random() * 2 ** 31)
    this.random = new Random(this.seed)
    this.log = options.log ?? (() => {})
  }

  private get compactAfterBytes() {
    return this.options.compactAfterBytes ?? 4 * 1024 * 1024
  }

  async run(): Promise<LoadReport> {
    const setupStarted = performance.now()
    const server = await startServer(this.options.dataDir, {
      env: { KEYWARD_COMPACT_AFTER_BYTES: String(this.compactAfterBytes) },
      ...(this.options.wrap ? { wrap: this.options.wrap } : {}),
    })
    let serverExitCode = -1
    try {
      this.url = server.url
      const init = initLine(server)
      this.vendorId = init.organization_id
      this.vendorTokens.vendor = init.token
      this.owner.set(this.vendorId, -1)
      const tokens = await this.setUpTenants()
      const setupMs = performance.now() - setupStarted
      this.log(`set up ${this.tenants.length} tenants, ${tokens} tokens, ${this.options.clients} clients in ${(setupMs / 1000).toFixed(1)} s`)

      // The load, with the memory sampler beside it.
      const rss: MemorySample[] = []
      const segments = new Set<string>()
      const segmentTimes: number[] = []
      const machine: MachineSecond[] = []
      let counters = await cpuCounters(server.proc.pid)
      this.loadStartedAt = this.stats.startedAt = performance.now()
      const until = this.loadStartedAt + this.options.seconds * 1000
      let sampling = true
      const sampler = (async () => {
        for (let tick = 0; sampling; tick++) {
          const value = await vmRss(server.proc.pid)
          const t = Math.round((performance.now() - this.loadStartedAt) / 100) / 10
          if (value !== null) rss.push([t, value, await auditEventCount(this.url, this.vendorTokens.vendor)])
          const now = await cpuCounters(server.proc.pid)
          if (counters && now && tick > 0) machine.push(machineSecond(counters, now, t))
          counters = now
          if (tick % 10 === 9) this.log(`${tick + 1} s: ${this.stats.requests} requests, ${this.stats.unexpectedCount} unexpected, VmRSS ${((value ?? 0) / 2 ** 20).toFixed(0)} MiB`)
          const next = this.loadStartedAt + (tick + 1) * 1000
          do {
            // New log segments, every 50 ms: each compaction starts one.
            for (const name of readdirSync(this.options.dataDir)) {
              if (!name.startsWith('wal-') || segments.has(name)) continue
              if (segments.size > 0) segmentTimes.push(Math.round((performance.now() - this.loadStartedAt) / 100) / 10)
              segments.add(name)
            }
            await Bun.sleep(Math.max(0, Math.min(50, next - performance.now())))
          } while (sampling && performance.now() < next)
        }
      })()
      const clients = this.tenants.flatMap((t) => t.clients)
      let durationMs: number
      try {
        await Promise.all(clients.map((client) => client.loop(until, this.options.requests)))
        durationMs = performance.now() - this.loadStartedAt
      } finally {
        sampling = false
        await sampler
      }

      // Everything read back and compared; then a graceful stop.
      const { checks, recordsAtEnd } = await this.verifyAtEnd()
      this.checkUnknownSeen()
      serverExitCode = await stopServer(server, 'SIGTERM')
      if (serverExitCode !== 0) this.stats.unexpected('server exit', `graceful stop exited ${serverExitCode}`)
      const serverStderr = server.stderr.text
        .split('\n')
        .filter((line) => line.trim() && !BENIGN_STDERR.some((benign) => benign.test(line)))
      // A 500 is logged with its trace id; anything else the server writes under load is worth a look, not a failure.
      const requestsPerSecond = this.stats.requests / (durationMs / 1000)
      const third = (this.options.seconds * 1000) / 3
      return {
        seed: this.seed,
        seconds: this.options.seconds,
        clients: this.options.clients,
        tenants: this.tenants.length,
        tokens,
        compactAfterBytes: this.compactAfterBytes,
        setupMs: Math.round(setupMs),
        durationMs: Math.round(durationMs),
        requests: this.stats.requests,
        unexpectedCount: this.stats.unexpectedCount,
        unexpected: this.stats.unexpectedLines,
        unexpectedByCategory: this.stats.unexpectedByCategory,
        kinds: this.stats.kinds(),
        scenarios: this.stats.scenarios,
        statuses: this.stats.statuses,
        perSecond: this.stats.perSecond.slice(0, Math.ceil(durationMs / 1000)),
        rss,
        memory: analyseMemory(rss, requestsPerSecond),
        segmentsSeen: segments.size,
        segmentTimes,
        slowest: this.stats.slowest,
        machine,
        recordsAtEnd,
        recordsCreatedAfterWarmup: this.createdAt.filter((t) => t >= third).length,
        finalChecks: checks,
        serverExitCode,
        serverStderr,
      }
    } finally {
      if (server.proc.exitCode === null && server.proc.signalCode === null) await stopServer(server, 'SIGKILL')
    }
  }

  // -------------------------------------------------------------------------------------------
  // Set-up

  /** The server as the vendor's admin token calls it, for requests that must succeed (set-up and final reads: fixtures.ts `requestOk`). */
  get server() {
    return httpCaller(this.url, this.vendorTokens.vendor)
  }

  private async issueToken(org: string, role: string): Promise<string> {
    const result = await run(keywardCommand(['issue-token', '--data', this.options.dataDir, '--org', org, '--role', role, '--ttl', '1d']))
    if (result.code !== 0) throw new Error(`issue-token --org ${org} --role ${role} exited ${result.code}: ${result.stderr}`)
    return result.stdout.trim()
  }

  private async setUpTenants(): Promise<number> {
    const count = this.options.tenants ?? 4
    const orgs: { customer: string; partner: string; toggle: string; env: boolean }[] = []
    for (let t = 0; t < count; t++) {
      const env = t < Math.ceil(count / 2)
      const customer = (
        await requestOk(this.server, 'POST', '/api/organizations', {
          description: `tenant ${t}`,
          parent_id: this.vendorId,
          ...(env ? { supported_environments: { default: 'PROD', supported: ORG_ENVIRONMENTS } } : {}),
        })
      ).organization.organization_id as string
      const partner = (await requestOk(this.server, 'POST', '/api/organizations', { description: `tenant ${t} partner`, parent_id: customer }))
        .organization.organization_id as string
      const toggle = (await requestOk(this.server, 'POST', '/api/organizations', { description: `tenant ${t} toggled partner`, parent_id: customer }))
        .organization.organization_id as string
      for (const id of [customer, partner, toggle]) this.owner.set(id, t)
      orgs.push({ customer, partner, toggle, env })
    }

    // Tokens by the real command, beside the running server.
    const wanted: [string, string, (token: string) => void][] = [[this.vendorId, 'viewer', (token) => (this.vendorTokens.vendor_viewer = token)]]
    const tokenSets = orgs.map(() => ({ admin: '', application_admin: '', viewer: '', partner: '' }))
    orgs.forEach((o, t) => {
      const set = tokenSets[t]!
      wanted.push([o.customer, 'admin', (token) => (set.admin = token)])
      wanted.push([o.customer, 'application_admin', (token) => (set.application_admin = token)])
      wanted.push([o.customer, 'viewer', (token) => (set.viewer = token)])
      wanted.push([o.partner, 'admin', (token) => (set.partner = token)])
    })
    // The first by the real command, beside the running server; the others through the API (a
    // process each costs 0.1-0.5 s on a busy machine: seconds in all).
    const [first, ...rest] = wanted
    first![2](await this.issueToken(first![0], first![1]))
    for (const [org, role, keep] of rest) {
      keep((await requestOk(this.server, 'POST', '/api/tokens', { organization_id: org, role, ttl: '1d' })).secret as string)
    }

    orgs.forEach((o, t) => {
      this.tenants.push({
        index: t,
        customerId: o.customer,
        envEnabled: o.env,
        partnerId: o.partner,
        togglePartnerId: o.toggle,
        tokens: tokenSets[t]!,
        clients: [],
        newPartners: [],
        customerDescription: `tenant ${t}`,
        togglePartnerState: 'active',
        defaultEnvironment: 'PROD',
        scratch: false,
      })
    })
    for (let i = 0; i < this.options.clients; i++) {
      const tenant = this.tenants[i % count]!
      tenant.clients.push(new LoadClient(this, tenant, tenant.clients.length, new Random(this.seed + 1000 + i)))
    }
    // Each client's application and a few records of its own, so reads find something at once.
    await mapLimited(
      this.tenants.flatMap((t) => t.clients),
      16,
      (client) => client.seed(),
    )
    return wanted.length + 1
  }

  // -------------------------------------------------------------------------------------------
  // Requests

  token(tenant: Tenant, role: Role): string {
    if (role === 'vendor' || role === 'vendor_viewer') return this.vendorTokens[role]
    return tenant.tokens[role]
  }

  async execute(tenant: Tenant, step: Step): Promise<void> {
    const started = performance.now()
    let res: HttpAnswer
    const label = `tenant ${tenant.index} ${step.role} ${step.method} ${step.path}${step.body !== undefined ? ` ${JSON.stringify(step.body)}` : ''}`
    try {
      res = await api(this.url, this.token(tenant, step.role), step.method, step.path, step.body)
    } catch (error) {
      this.stats.record(step, 'error', performance.now() - started)
      this.stats.unexpected('no answer (timeout or connection error)', `${label}: ${(error as Error).message}`, step.kind)
      step.taint?.()
      return
    }
    this.stats.record(step, String(res.status), performance.now() - started)
    const answer = `${res.status} ${JSON.stringify(res.body).slice(0, 300)}`
    if (res.status >= 500) {
      this.stats.unexpected('5xx', `${label}: ${answer}`, step.kind)
      step.taint?.()
      return
    }
    if (res.status !== step.expect) {
      const category = step.scenario === 'cross-tenant' && res.status < 300 ? 'cross-tenant 2xx' : 'wrong status'
      this.stats.unexpected(category, `${label}: expected ${step.expect}, got ${answer}`, step.kind)
      step.taint?.()
      return
    }
    let problem: Problem | null
    try {
      // `check` and `done` are about a successful answer; an expected error only needs its shape.
      problem = this.checkShape(res) ?? (res.status < 300 ? step.check?.(res.body) : null) ?? null
    } catch (error) {
      problem = wrong(`malformed answer (${(error as Error).message})`)
    }
    if (problem) {
      this.stats.unexpected(problem.category, `${label}: ${problem.message}; answer ${answer}`, step.kind)
      step.taint?.()
      return
    }
    if (res.status < 300) step.done?.(res.body)
  }

  private checkShape(res: HttpAnswer): Problem | null {
    if (res.status >= 400) {
      if (!res.contentType.startsWith('application/problem+json')) return wrong(`error answered as ${res.contentType}`)
      if (res.body?.status !== res.status || typeof res.body?.code !== 'string') return wrong('error body is not a problem document')
    } else if (!res.contentType.startsWith('application/json')) {
      return wrong(`answered as ${res.contentType}`)
    }
    return null
  }

  /** Every id in a tenant's answer must be the tenant's (ids not known yet are checked at the end). */
  checkOwned(tenant: number, ids: readonly string[], where: string): Problem | null {
    for (const id of ids) {
      const owner = this.owner.get(id)
      if (owner === undefined) this.unknownSeen.push({ tenant, id, where })
      else if (owner !== tenant) return leak(`${where}: ${id} belongs to ${owner === -1 ? 'the vendor' : `tenant ${owner}`}`)
    }
    return null
  }

  private checkUnknownSeen(): void {
    for (const { tenant, id, where } of this.unknownSeen) {
      const owner = this.owner.get(id)
      if (owner === undefined) this.stats.unexpected('wrong answer', `${where}: ${id} is no record any client made`)
      else if (owner !== tenant) this.stats.unexpected('cross-tenant data', `${where}: ${id} belongs to ${owner === -1 ? 'the vendor' : `tenant ${owner}`}`)
    }
  }

  /** A tenant other than `tenant`, at random. */
  otherTenant(tenant: Tenant, random: Random): Tenant {
    const others = this.tenants.filter((t) => t !== tenant)
    return random.pick(others)
  }

  noteCreated(): void {
    this.createdAt.push(performance.now() - this.loadStartedAt)
  }

  // -------------------------------------------------------------------------------------------
  // The end: every record read back with the vendor token

  private async verifyAtEnd(): Promise<{ checks: number; recordsAtEnd: Record<string, number> }> {
    let checks = 0
    const mismatch = (line: string) => this.stats.unexpected('final state', line)
    const paged = async (path: string, field: string): Promise<Body[]> => {
      const all: Body[] = []
      for (let page = 1; ; page++) {
        const body = await requestOk(this.server, 'GET', `${path}${path.includes('?') ? '&' : '?'}page=${page}&page_size=1000`)
        all.push(...body[field])
        if (body[field].length < 1000) return all
      }
    }
    const recordsAtEnd: Record<string, number> = {}
    const organizations = (await requestOk(this.server, 'GET', '/api/organizations')).organizations as Body[]
    const applications = (await requestOk(this.server, 'GET', '/api/applications')).applications as Body[]
    recordsAtEnd.organizations = organizations.length
    recordsAtEnd.applications = applications.length
    recordsAtEnd.consumers = 0
    recordsAtEnd.installations = 0
    recordsAtEnd.enrollments = 0
    recordsAtEnd['keysets (read back)'] = 0
    const appById = new Map(applications.map((a) => [a.application_id as string, a]))
    const orgById = new Map(organizations.map((o) => [o.organization_id as string, o]))
    for (const o of organizations) if (!this.owner.has(o.organization_id)) mismatch(`organization ${o.organization_id} exists, but no client made it`)
    for (const a of applications) if (!this.owner.has(a.application_id)) mismatch(`application ${a.application_id} exists, but no client made it`)

    const keysetChecks: [EnrollmentModel, Body][] = []
    for (const tenant of this.tenants) {
      const customer = orgById.get(tenant.customerId)
      checks++
      if (customer?.description !== tenant.customerDescription) mismatch(`customer ${tenant.customerId}: description ${customer?.description}, expected ${tenant.customerDescription}`)
      checks++
      if (orgById.get(tenant.togglePartnerId)?.state !== tenant.togglePartnerState) mismatch(`partner ${tenant.togglePartnerId}: not ${tenant.togglePartnerState}`)
      for (const id of tenant.newPartners) {
        checks++
        if (!orgById.has(id)) mismatch(`partner ${id}: acknowledged, missing`)
      }
      if (tenant.envEnabled) {
        const envs = await requestOk(this.server, 'GET', `/api/organizations/${tenant.customerId}/environments`)
        const supported = sortedList([...ORG_ENVIRONMENTS.split(','), ...(tenant.scratch ? ['SCRATCH'] : [])])
        checks++
        if (envs.default !== tenant.defaultEnvironment || envs.supported !== supported) {
          mismatch(`environments of ${tenant.customerId}: ${envs.default} / ${envs.supported}, expected ${tenant.defaultEnvironment} / ${supported}`)
        }
      }
      const q = `?organization_ids=${tenant.customerId}`
      const [consumers, installations, enrollments] = await Promise.all([
        paged(`/api/consumers${q}`, 'consumers'),
        paged(`/api/installations${q}`, 'installations'),
        paged(`/api/enrollments${q}`, 'enrollments'),
      ])
      recordsAtEnd.consumers += consumers.length
      recordsAtEnd.installations += installations.length
      recordsAtEnd.enrollments += enrollments.length
      const compare = <M>(kind: string, found: Body[], idField: string, models: Map<string, M>, same: (model: M, record: Body) => string | null) => {
        const byId = new Map(found.map((r) => [r[idField] as string, r]))
        for (const [id, model] of models) {
          if (this.uncertain.has(id)) continue
          checks++
          const record = byId.get(id)
          const problem = record ? same(model, record) : 'acknowledged, missing'
          if (problem) mismatch(`${kind} ${id} of tenant ${tenant.index}: ${problem}`)
        }
        for (const id of byId.keys()) {
          if (!models.has(id) && !this.uncertain.has(id)) mismatch(`${kind} ${id} exists in tenant ${tenant.index}, but no acknowledged write made it there`)
        }
      }
      const allOf = <M>(pick: (c: LoadClient) => Map<string, M>) => new Map(tenant.clients.flatMap((c) => [...pick(c)]))
      compare('consumer', consumers, 'consumer_id', allOf((c) => c.consumers), (m, r) => (r.state === m.state ? null : `state ${r.state}, expected ${m.state}`))
      compare('installation', installations, 'installation_id', allOf((c) => c.installations), (m, r) =>
        r.state === m.state && r.description === m.description ? null : `${r.state} "${r.description}", expected ${m.state} "${m.description}"`,
      )
      compare('enrollment', enrollments, 'enrollment_id', allOf((c) => c.enrollments), (m, r) => {
        const active = m.keysets[m.keysets.length - 1] ?? null
        if (r.state !== m.state || r.active_keyset_id !== active) return `${r.state} keyset ${r.active_keyset_id}, expected ${m.state} keyset ${active}`
        if (m.app.state === 'active' && m.keysets.length > 0) keysetChecks.push([m, r])
        return null
      })
      for (const client of tenant.clients) {
        for (const app of client.apps) {
          if (this.uncertain.has(app.id)) continue
          checks++
          const a = appById.get(app.id)
          const environments = a?.allowed_environments ?? 'PRODUCTION'
          if (!a || a.state !== app.state || a.description !== app.description || environments !== app.environments.join(',')) {
            mismatch(`application ${app.id}: found ${JSON.stringify(a)}, expected ${JSON.stringify(app)}`)
          }
        }
      }
    }
    // Keysets of every enrollment that has some (readable while its application is active).
    // One page of the most a page holds: the keyset budget keeps an enrollment's far below it.
    const lists = await mapLimited(keysetChecks, 16, ([m]) => requestOk(this.server, 'GET', `/api/enrollments/${m.id}/keysets?page_size=1000`))
    keysetChecks.forEach(([m], i) => {
      checks++
      const ids = (lists[i]!.keysets as Body[]).map((k) => k.keyset_id as string)
      recordsAtEnd['keysets (read back)']! += ids.length
      if (ids.join() !== m.keysets.join()) mismatch(`keysets of ${m.id}: ${ids.join()}, expected ${m.keysets.join()}`)
    })
    return { checks, recordsAtEnd }
  }
}
