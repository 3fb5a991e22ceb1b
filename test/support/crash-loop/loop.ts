/** The crash loop: rounds of writes each ended by a kill, restarts, and every record read back and compared after each. */
import { readdirSync } from 'node:fs'
import { mapLimited } from '../map-limited'
import { Random } from '../random'
import { api, initLine, spawnServer, startServer, stopServer, type ServerProcess } from '../server-process'
import { Client } from './client'
import { VIEW_FIELDS, matches, pick, show, type Fields, type Kind, type Tracked, type UnknownCreate } from './model'
import { options, type CrashLoopOptions } from './options'
import type { CrashLoopReport } from './report'

export class CrashLoop {
  private readonly random: Random
  private readonly seed: number
  private readonly log: (line: string) => void
  private readonly records = new Map<string, Tracked>()
  private readonly clients: Client[] = []
  private readonly unknownCreates: UnknownCreate[] = []
  /** `roundUntilKill` waiting for the clients' writes: resolved once `count` in all were acknowledged. */
  private acknowledgedWaiter: { readonly count: number; readonly resolve: () => void } | undefined
  private readonly counts = {
    acknowledged: 0,
    byOperation: {} as Record<string, number>,
    unanswered: 0,
    unansweredFoundDone: 0,
    killsDuringShutdown: 0,
    gracefulStopsFinished: 0,
    killsDuringStartup: 0,
    tornTailWarnings: 0,
    recordChecks: 0,
    eventChecks: 0,
  }
  private readonly segments = new Set<string>()
  private readonly lost: string[] = []
  private readonly unexpected: string[] = []
  vendorId = ''
  token = ''
  url = ''
  /** Set once the server of this round is dead: clients stop starting requests. */
  stopped = false

  constructor(private readonly options: CrashLoopOptions) {
    this.seed = options.seed ?? Math.floor(Math.random() * 2 ** 31)
    this.random = new Random(this.seed)
    this.log = options.log ?? (() => {})
  }

  async run(): Promise<CrashLoopReport> {
    const started = performance.now()
    const clientCount = options(this.options).clients
    let server = await this.start()
    try {
      ;({ organization_id: this.vendorId, token: this.token } = initLine(server))
      this.url = server.url
      for (let i = 0; i < clientCount; i++) this.clients.push(new Client(this, new Random(this.seed + 1000 + i), i))

      for (let kill = 1; kill <= this.options.kills; kill++) {
        await this.roundUntilKill(server)
        if (this.random.chance(options(this.options).startupKillShare)) await this.killDuringStartup()
        server = await this.start()
        this.url = server.url
        if (server.stderr.text.includes('dropped an incomplete last record')) this.counts.tornTailWarnings++
        for (const name of readdirSync(this.options.dataDir)) if (name.startsWith('wal-')) this.segments.add(name)
        await this.verify()
        this.log(
          `kill ${kill}/${this.options.kills}: ${this.counts.acknowledged} acknowledged, ${this.counts.unanswered} unanswered, ` +
            `${this.lost.length} lost, ${this.unexpected.length} unexpected, ${this.records.size} records`,
        )
        if (this.lost.length > 0 || this.unexpected.length > 0) break
      }

      // The server takes writes again after the last restart, and a graceful stop keeps them all.
      if (this.lost.length === 0) {
        this.stopped = false
        await Promise.all(this.clients.map((client) => client.steps(3)))
        const code = await stopServer(server, 'SIGTERM')
        if (code !== 0) this.unexpected.push(`graceful stop after the loop exited ${code}: ${server.stderr.text}`)
        server = await this.start()
        this.url = server.url
        await this.verify()
      }
    } finally {
      if (server.proc.exitCode === null) await stopServer(server, 'SIGTERM')
    }
    return {
      seed: this.seed,
      kills: this.options.kills,
      killsDuringShutdown: this.counts.killsDuringShutdown,
      gracefulStopsFinished: this.counts.gracefulStopsFinished,
      killsDuringStartup: this.counts.killsDuringStartup,
      compactAfterBytes: options(this.options).compactAfterBytes,
      segmentsSeen: this.segments.size,
      acknowledgedWrites: this.counts.acknowledged,
      acknowledgedByOperation: this.counts.byOperation,
      unansweredWrites: this.counts.unanswered,
      unansweredFoundDone: this.counts.unansweredFoundDone,
      writesLost: this.lost.length,
      lost: this.lost,
      unexpected: this.unexpected,
      tornTailWarnings: this.counts.tornTailWarnings,
      recordsAtEnd: [...this.records.values()].filter((r) => r.acked !== null).length,
      recordChecks: this.counts.recordChecks,
      eventChecks: this.counts.eventChecks,
      durationMs: Math.round(performance.now() - started),
    }
  }

  private start(): Promise<ServerProcess> {
    return startServer(this.options.dataDir, { env: { KEYWARD_COMPACT_AFTER_BYTES: String(options(this.options).compactAfterBytes) } })
  }

  /** A restart killed at a random instant before it is done starting (or just after). */
  private async killDuringStartup(): Promise<void> {
    const server = spawnServer(this.options.dataDir, { env: { KEYWARD_COMPACT_AFTER_BYTES: String(options(this.options).compactAfterBytes) } })
    await Bun.sleep(this.random.int(0, 150))
    const code = await stopServer(server, 'SIGKILL')
    if (code !== -9) this.unexpected.push(`a start exited ${code} by itself: ${server.stderr.text}`)
    if (server.stderr.text.includes('dropped an incomplete last record')) this.counts.tornTailWarnings++
    this.counts.killsDuringStartup++
  }

  /** Clients write until the server is killed at a random instant; resolves once all have stopped. */
  private async roundUntilKill(server: ServerProcess): Promise<void> {
    const { acknowledgedBeforeKill, minKillDelayMs, maxKillDelayMs, gracefulShare } = options(this.options)
    this.stopped = false
    const running = this.clients.map((client) => client.steps(Infinity))
    if (acknowledgedBeforeKill > 0) {
      // A fixed amount of work first, whatever the machine's speed; then the random instant.
      const enough = Promise.withResolvers<void>()
      this.acknowledgedWaiter = { count: this.counts.acknowledged + acknowledgedBeforeKill, resolve: enough.resolve }
      if (this.counts.acknowledged >= this.acknowledgedWaiter.count) enough.resolve()
      // Or until every client has stopped (each stops at an unexpected answer, which the report then says).
      await Promise.race([enough.promise, Promise.all(running)])
      this.acknowledgedWaiter = undefined
    }
    await Bun.sleep(this.random.int(minKillDelayMs, maxKillDelayMs)) // the random kill instant
    if (this.random.chance(gracefulShare)) {
      server.proc.kill('SIGTERM')
      await Bun.sleep(this.random.int(0, 40)) // somewhere in the snapshot write, or after it
      if (server.proc.exitCode === null) this.counts.killsDuringShutdown++
      else this.counts.gracefulStopsFinished++
    }
    const code = await stopServer(server, 'SIGKILL')
    if (code !== -9 && code !== 0) this.unexpected.push(`server exited ${code} before the kill: ${server.stderr.text}`)
    this.stopped = true
    await Promise.all(running)
  }

  // -------------------------------------------------------------------------------------------
  // Tracking

  get(kind: Kind, id: string): Tracked | undefined {
    return this.records.get(`${kind}:${id}`)
  }

  /** The record's known state (it was acknowledged, or settled by the last verification). */
  state(kind: Kind, id: string): Fields {
    return this.get(kind, id)!.acked!
  }

  /** An acknowledged write: `fields` is the new state (merged into what is known). */
  acknowledge(kind: Kind, id: string, fields: Fields): void {
    const key = `${kind}:${id}`
    const record = this.records.get(key) ?? { kind, id, acked: null, modifiedAfter: null, pending: null }
    const previousModified = record.acked?.modified as string | undefined
    record.acked = { ...(record.acked ?? {}), ...pick(kind, fields) }
    if (VIEW_FIELDS[kind].includes('modified') && fields.modified === undefined) {
      // A change whose answer does not show the record's new `modified`: only know it moved on.
      delete record.acked.modified
      record.modifiedAfter = previousModified ?? record.modifiedAfter
    } else if (fields.modified !== undefined) {
      record.modifiedAfter = null
    }
    record.pending = null
    this.records.set(key, record)
  }

  /** An unanswered write: it may have changed these fields (or created the record). */
  maybe(kind: Kind, id: string, fields: Fields): void {
    const key = `${kind}:${id}`
    const record = this.records.get(key) ?? { kind, id, acked: null, modifiedAfter: null, pending: null }
    record.pending = { ...(record.pending ?? {}), ...fields }
    this.records.set(key, record)
  }

  maybeCreated(create: UnknownCreate): void {
    this.unknownCreates.push(create)
  }

  countAcknowledged(operation: string): void {
    this.counts.acknowledged++
    if (this.acknowledgedWaiter && this.counts.acknowledged >= this.acknowledgedWaiter.count) this.acknowledgedWaiter.resolve()
    this.counts.byOperation[operation] = (this.counts.byOperation[operation] ?? 0) + 1
  }

  countUnanswered(): void {
    this.counts.unanswered++
  }

  reportUnexpected(line: string): void {
    this.unexpected.push(line)
  }

  /** Every record of kind `kind` the model knows. */
  tracked(kind: Kind): Tracked[] {
    return [...this.records.values()].filter((r) => r.kind === kind)
  }

  // -------------------------------------------------------------------------------------------
  // Verification after a restart

  private async fetch(path: string): Promise<Fields> {
    const res = await api(this.url, this.token, 'GET', path)
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body as Fields
  }

  private async fetchPaged(path: string, field: string): Promise<Fields[]> {
    const all: Fields[] = []
    for (let page = 1; ; page++) {
      const body = await this.fetch(`${path}?page=${page}&page_size=1000`)
      const items = body[field] as Fields[]
      all.push(...items)
      if (items.length < 1000) return all
    }
  }

  /** Reads every record back, compares, and settles the model on what is there. */
  async verify(): Promise<void> {
    const actual = new Map<string, Fields>()
    const put = (kind: Kind, id: string, body: Fields) => actual.set(`${kind}:${id}`, pick(kind, body))
    const [organizations, applications, consumers, installations, enrollments, tokens, events] = await Promise.all([
      this.fetch('/api/organizations').then((b) => b.organizations as Fields[]),
      this.fetch('/api/applications').then((b) => b.applications as Fields[]),
      this.fetchPaged('/api/consumers', 'consumers'),
      this.fetchPaged('/api/installations', 'installations'),
      this.fetchPaged('/api/enrollments', 'enrollments'),
      this.fetchPaged('/api/tokens', 'tokens'),
      this.fetchPaged('/api/audit-events', 'audit_events'),
    ])
    for (const o of organizations) if (o.organization_id !== this.vendorId) put('organization', o.organization_id as string, o)
    for (const a of applications) put('application', a.application_id as string, a)
    for (const c of consumers) put('consumer', c.consumer_id as string, c)
    for (const i of installations) put('installation', i.installation_id as string, i)
    for (const e of enrollments) put('enrollment', e.enrollment_id as string, e)
    // The vendor's own tokens (the one init printed) are nobody's writes here.
    for (const t of tokens) if (t.organization_id !== this.vendorId) put('token', t.token_id as string, t)

    // Records nobody acknowledged: each must be an unanswered create of that kind, taken on.
    for (const [key, fields] of actual) {
      if (this.records.has(key)) continue
      const [kind, id] = key.split(':') as [Kind, string]
      this.adoptOrReport(kind, id, fields)
    }

    // Organization environments, and keysets (per enrollment; readable while its application is active).
    const customers = this.tracked('environments').map((r) => r.id)
    const environmentSets = await mapLimited(customers, 16, (id) => api(this.url, this.token, 'GET', `/api/organizations/${id}/environments`))
    customers.forEach((id, i) => {
      const res = environmentSets[i]!
      if (res.status === 200) put('environments', id, res.body as Fields)
      else if (res.status !== 404) throw new Error(`GET environments of ${id}: ${res.status}`)
    })
    const activeApps = new Set(applications.filter((a) => a.state === 'active').map((a) => a.application_id))
    const readable = enrollments.filter((e) => activeApps.has(e.application_id))
    // Paged like every list (an enrollment rotated past a page has keysets on the next).
    const keysetLists = await mapLimited(readable, 16, (e) => this.fetchPaged(`/api/enrollments/${e.enrollment_id}/keysets`, 'keysets'))
    const readableIds = new Set(readable.map((e) => e.enrollment_id as string))
    readable.forEach((enrollment, i) => {
      const keysets = keysetLists[i]!
      for (const keyset of keysets) {
        const id = keyset.keyset_id as string
        put('keyset', id, keyset)
        if (!this.records.has(`keyset:${id}`)) this.adoptOrReport('keyset', id, pick('keyset', keyset))
        // One active keyset per enrollment, the one it names; the others retired.
        const shouldBe = id === enrollment.active_keyset_id ? 'active' : 'retired'
        if (keyset.state !== shouldBe) this.lost.push(`keyset ${id}: ${keyset.state}, but enrollment ${enrollment.enrollment_id} names ${enrollment.active_keyset_id}`)
      }
    })

    this.checkAuditTrail(events, { organizations, applications, consumers, installations, enrollments, tokens }, keysetLists.flat(), readableIds)

    for (const record of [...this.records.values()]) {
      const enrollmentId = (record.acked ?? record.pending)?.enrollment_id as string
      if (record.kind === 'keyset' && !readableIds.has(enrollmentId)) continue // its application is suspended: next time
      this.counts.recordChecks++
      const key = `${record.kind}:${record.id}`
      const found = actual.get(key)
      const problem = this.compare(record, found)
      if (problem) this.lost.push(problem)
      if (found) {
        record.acked = found
        record.modifiedAfter = null
      } else {
        this.records.delete(key)
        this.forget(record)
      }
      record.pending = null
    }
    // Unanswered creates that did not happen.
    this.unknownCreates.length = 0
    for (const client of this.clients) client.settle()
  }

  /**
   * The audit trail against the records as read back (see the top of index.ts). Keysets are seen
   * only while their application is active: the events of the others are checked next time.
   */
  private checkAuditTrail(events: Fields[], records: Record<string, Fields[]>, keysets: Fields[], readableEnrollments: Set<string>): void {
    const newest = new Map<string, string>()
    const creates = new Map<string, number>()
    const revokes = new Map<string, number>()
    const touch = (id: string, time: string) => {
      if (!(newest.get(id)! >= time)) newest.set(id, time)
    }
    for (const event of events) {
      this.counts.eventChecks++
      const action = event.action as string
      const target = (event.target as Fields).id as string
      touch(target, event.time as string)
      // A keyset's creation changes its enrollment too (one event, docs/api.md "Audit events").
      if (action === 'keyset.create') touch(((event.changes as Record<string, unknown[]>).enrollment_id as string[])[1]!, event.time as string)
      if (action.endsWith('.create') || action === 'vendor.init') {
        creates.set(target, (creates.get(target) ?? 0) + 1)
        // A create's changes are its record as created, which replay rebuilds from the record (docs/storage.md "Audit events in the log").
        const changes = event.changes as Record<string, unknown[] | undefined>
        const key = `${(event.target as Fields).type as string}_id`
        if (changes[key]?.[1] !== target || changes.created?.[1] !== event.time) this.lost.push(`event ${action} ${event.event_id}: changes ${JSON.stringify(changes)} are not its record's creation`)
      }
      if (action === 'token.revoke') revokes.set(target, (revokes.get(target) ?? 0) + 1)
    }
    const exists = new Set<string>()
    const idOf = (kind: string, record: Fields) => record[`${kind}_id`] as string
    for (const [list, kind] of [['organizations', 'organization'], ['applications', 'application'], ['consumers', 'consumer'], ['installations', 'installation'], ['enrollments', 'enrollment']] as const) {
      for (const record of records[list]!) {
        const id = idOf(kind, record)
        exists.add(id)
        if (creates.get(id) !== 1) this.lost.push(`${kind} ${id}: ${creates.get(id) ?? 0} create events`)
        if (newest.get(id) !== record.modified) this.lost.push(`${kind} ${id}: modified ${record.modified}, its newest event ${newest.get(id)}`)
      }
    }
    for (const token of records.tokens!) {
      const id = token.token_id as string
      exists.add(id)
      if (creates.get(id) !== 1) this.lost.push(`token ${id}: ${creates.get(id) ?? 0} create events`)
      if ((revokes.get(id) ?? 0) !== (token.state === 'revoked' ? 1 : 0)) this.lost.push(`token ${id}: ${token.state}, ${revokes.get(id) ?? 0} revoke events`)
    }
    for (const keyset of keysets) {
      const id = keyset.keyset_id as string
      exists.add(id)
      if (creates.get(id) !== 1 || newest.get(id)! < (keyset.created as string)) this.lost.push(`keyset ${id}: created ${keyset.created}, ${creates.get(id) ?? 0} create events`)
    }
    for (const event of events) {
      const target = (event.target as Fields).id as string
      if (exists.has(target)) continue
      const enrollment = event.action === 'keyset.create' ? ((event.changes as Record<string, unknown[]>).enrollment_id as string[])[1]! : null
      if (enrollment !== null && !readableEnrollments.has(enrollment)) continue // its application is suspended: next time
      this.lost.push(`event ${event.action} ${event.event_id} is about ${target}, which does not exist`)
    }
  }

  private compare(record: Tracked, found: Fields | undefined): string | null {
    const label = `${record.kind} ${record.id}`
    if (!found) {
      return record.acked === null ? null : `${label}: acknowledged as ${show(record.acked)}, missing after the restart`
    }
    const base = record.acked ?? {}
    if (record.acked !== null && matches(found, base, record.modifiedAfter)) return null
    if (record.pending) {
      const { modified, ...rest } = base
      const after = (modified as string | undefined) ?? record.modifiedAfter
      if (matches(found, { ...rest, ...record.pending }, after)) {
        this.counts.unansweredFoundDone++
        return null
      }
    }
    return `${label}: acknowledged as ${show(record.acked)}${record.modifiedAfter ? ` (modified after ${record.modifiedAfter})` : ''}` +
      `${record.pending ? `, or unanswered ${show(record.pending)}` : ''}; found ${show(found)}`
  }

  private adoptOrReport(kind: Kind, id: string, fields: Fields): void {
    const at = this.unknownCreates.findIndex((c) => c.kind === kind && matches(fields, c.fields, null))
    if (at === -1) {
      this.lost.push(`${kind} ${id} exists, but no write created it: ${show(fields)}`)
      return
    }
    const [create] = this.unknownCreates.splice(at, 1)
    this.records.set(`${kind}:${id}`, { kind, id, acked: null, modifiedAfter: null, pending: create!.fields })
    create!.adopt(id)
  }

  /** An unanswered create that did not happen: the client drops the id. */
  private forget(record: Tracked): void {
    for (const client of this.clients) client.forget(record.kind, record.id)
  }
}
