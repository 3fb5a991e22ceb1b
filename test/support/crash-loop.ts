/**
 * The crash loop (issue 4, item 1), shared by test/process/crash-loop.test.ts (a few kills, in CI)
 * and bench/crash-loop.ts (hundreds of kills, by hand).
 *
 * A real server process on one data dir; many concurrent clients, each owning one customer and
 * everything under it, doing every kind of write the API has. Every acknowledged (2xx) write's
 * answer is recorded as the record's latest acknowledged state. At a random instant the server is
 * SIGKILLed (sometimes in the middle of a graceful stop, while it writes its snapshot), restarted on
 * the same dir, and every record is read back and compared. Some restarts are themselves killed at
 * a random instant during start-up (recovery, torn-tail repair), and the server compacts every few
 * hundred KiB of log, so kills also land in the middle of compactions under load:
 *
 *   - a record's state must be its latest acknowledged state, or, if a write to it got no answer
 *     (the kill cut it off), the state that write would have made: unanswered writes may or may not
 *     have happened, acknowledged ones must have;
 *   - nothing may exist that no write created;
 *   - the audit trail matches the records (CONTRACT section 10): every record has its one create
 *     event, whose changes hold the record's id and creation time, and its `modified` is the time of the newest event about it (a change that lost its
 *     event, or an event that lost its change, would leave the two apart); every event is about a
 *     record that exists; a token is revoked exactly when it has a revoke event.
 *
 * Each client writes its own records one request at a time, so "latest" is simply the last answer;
 * the concurrency (and the group commit it drives) comes from the many clients. After a restart the
 * model is re-read from the server, which settles what the unanswered writes did.
 */
import { generateKeyPairSync } from 'node:crypto'
import { readdirSync } from 'node:fs'
import { api, initLine, spawnServer, startServer, stopServer, type ApiResponse, type ServerProcess } from './server-process'

export interface CrashLoopOptions {
  readonly dataDir: string
  readonly kills: number
  /** Concurrent clients (default 24). */
  readonly clients?: number
  /** The kill comes this long after the restarted server listens: uniform in [min, max] ms. */
  readonly minKillDelayMs?: number
  readonly maxKillDelayMs?: number
  /** Share of kills that land during a graceful stop (SIGTERM first, SIGKILL 0-40 ms later). */
  readonly gracefulShare?: number
  /** Share of restarts killed at a random instant during start-up (0-150 ms after spawning) first. */
  readonly startupKillShare?: number
  /** The server compacts when its log segment passes this many bytes (KEYWARD_COMPACT_AFTER_BYTES). */
  readonly compactAfterBytes?: number
  /** For a reproducible sequence of operations and delays (default: random, and reported). */
  readonly seed?: number
  readonly log?: (line: string) => void
}

export interface CrashLoopReport {
  readonly seed: number
  readonly kills: number
  /** Kills sent while a graceful stop (snapshot) was under way; some stops finished first. */
  readonly killsDuringShutdown: number
  readonly gracefulStopsFinished: number
  /** Extra kills during a restart's start-up, before it served anything. */
  readonly killsDuringStartup: number
  /** The compaction threshold the server ran with. */
  readonly compactAfterBytes: number
  /** Log segments seen over the run: each compaction or graceful stop starts a new one. */
  readonly segmentsSeen: number
  readonly acknowledgedWrites: number
  readonly acknowledgedByOperation: Record<string, number>
  /** Writes cut off by a kill: no answer, so either outcome is allowed. */
  readonly unansweredWrites: number
  /** Of those, the ones found done after the restart. */
  readonly unansweredFoundDone: number
  /** Audit events read back and compared with the records, over all verifications. */
  readonly eventChecks: number
  /** Records whose latest acknowledged state was not found after a restart: must be 0. */
  readonly writesLost: number
  /** What was lost or appeared from nowhere, one line each (empty when all is well). */
  readonly lost: string[]
  /** Answers that were not what the model predicted (a 4xx/5xx for a valid write): must be empty. */
  readonly unexpected: string[]
  /** Restarts that dropped a torn last log record (with the warning the contract asks for). */
  readonly tornTailWarnings: number
  readonly recordsAtEnd: number
  readonly recordChecks: number
  readonly durationMs: number
}

// ---------------------------------------------------------------------------------------------
// The model: what each record should look like

type Kind = 'organization' | 'environments' | 'application' | 'consumer' | 'installation' | 'enrollment' | 'keyset' | 'token'
type Fields = Record<string, unknown>

/** In a pending effect: the field changes to a value we cannot know (a new keyset's id). */
const ANY = Symbol('any')

/** The fields each kind is compared on: the view the verification reads back. */
const VIEW_FIELDS: Record<Kind, readonly string[]> = {
  organization: ['description', 'state', 'created', 'modified'],
  environments: ['default', 'supported'],
  application: ['organization_id', 'description', 'allowed_environments', 'state', 'created', 'modified'],
  consumer: ['state', 'created', 'modified'],
  installation: ['description', 'state', 'created', 'modified'],
  enrollment: [
    'installation_id',
    'consumer_id',
    'application_id',
    'environment',
    'nickname',
    'active_keyset_id',
    'client_enclave_key',
    'state',
    'created',
    'modified',
  ],
  keyset: ['enrollment_id', 'environment', 'state', 'created'],
  token: ['organization_id', 'role', 'state', 'created'],
}

interface Tracked {
  readonly kind: Kind
  readonly id: string
  /** The state the latest acknowledged write established; null while only an unanswered create made it. */
  acked: Fields | null
  /** Set when an acknowledged change's answer does not show `modified`: it is newer than this. */
  modifiedAfter: string | null
  /** What the unanswered write to this record, if any, would have changed. */
  pending: Fields | null
}

function pick(kind: Kind, body: Fields): Fields {
  const fields: Fields = {}
  for (const name of VIEW_FIELDS[kind]) if (body[name] !== undefined) fields[name] = body[name]
  return fields
}

function sameValue(actual: unknown, expected: unknown): boolean {
  return expected === ANY || JSON.stringify(actual) === JSON.stringify(expected)
}

/** `actual` has every field of `expected`, and (if given) a `modified` newer than `after`. */
function matches(actual: Fields, expected: Fields, after: string | null): boolean {
  for (const [name, value] of Object.entries(expected)) if (!sameValue(actual[name], value)) return false
  if (after !== null && expected.modified === undefined && actual.modified !== undefined && !(String(actual.modified) > after)) return false
  return true
}

const show = (fields: Fields | null) => JSON.stringify(fields, (_, v) => (v === ANY ? '<any>' : v))

// ---------------------------------------------------------------------------------------------
// Randomness (seeded, so a failing run can be repeated)

function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export class Random {
  private readonly next: () => number
  constructor(seed: number) {
    this.next = mulberry32(seed)
  }
  float(): number {
    return this.next()
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!
  }
  uuid(): string {
    const hex = Array.from({ length: 32 }, () => Math.floor(this.next() * 16).toString(16)).join('')
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${'89ab'[Math.floor(this.next() * 4)]}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
  }
  subset<T>(items: readonly T[]): T[] {
    const chosen = items.filter(() => this.chance(0.5))
    return chosen.length > 0 ? chosen : [this.pick(items)]
  }
}

/** A fresh P-256 public key, as the API takes it: standard base64 of the SPKI DER. */
export function newClientKey(): string {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  return publicKey.export({ type: 'spki', format: 'der' }).toString('base64')
}

const ENVIRONMENT_POOL = ['PROD', 'TEST', 'DEV', 'QA', 'STAGING', 'EU', 'US']

// ---------------------------------------------------------------------------------------------
// The run

export async function runCrashLoop(options: CrashLoopOptions): Promise<CrashLoopReport> {
  const loop = new CrashLoop(options)
  return loop.run()
}

/** An unanswered create of a record whose id the server picks: it may have happened. */
interface UnknownCreate {
  readonly kind: 'organization' | 'application' | 'keyset' | 'token'
  /** What the record would look like (compared fields). */
  readonly fields: Fields
  /** Takes the record on when it turns out to exist. */
  readonly adopt: (id: string) => void
}

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

class CrashLoop {
  private readonly random: Random
  private readonly seed: number
  private readonly log: (line: string) => void
  private readonly records = new Map<string, Tracked>()
  private readonly clients: Client[] = []
  private readonly unknownCreates: UnknownCreate[] = []
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
    const { minKillDelayMs, maxKillDelayMs, gracefulShare } = options(this.options)
    this.stopped = false
    const running = this.clients.map((client) => client.steps(Infinity))
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
    const keysetLists = await mapLimited(readable, 16, (e) => this.fetch(`/api/enrollments/${e.enrollment_id}/keysets`))
    const readableIds = new Set(readable.map((e) => e.enrollment_id as string))
    readable.forEach((enrollment, i) => {
      const keysets = keysetLists[i]!.keysets as Fields[]
      for (const keyset of keysets) {
        const id = keyset.keyset_id as string
        put('keyset', id, keyset)
        if (!this.records.has(`keyset:${id}`)) this.adoptOrReport('keyset', id, pick('keyset', keyset))
        // One active keyset per enrollment, the one it names; the others retired.
        const shouldBe = id === enrollment.active_keyset_id ? 'active' : 'retired'
        if (keyset.state !== shouldBe) this.lost.push(`keyset ${id}: ${keyset.state}, but enrollment ${enrollment.enrollment_id} names ${enrollment.active_keyset_id}`)
      }
    })

    this.checkAuditTrail(events, { organizations, applications, consumers, installations, enrollments, tokens }, keysetLists.flatMap((list) => list.keysets as Fields[]), readableIds)

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
   * The audit trail against the records as read back (see the top of this file). Keysets are seen
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
      // A keyset's creation changes its enrollment too (one event, CONTRACT section 10).
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

function options(o: CrashLoopOptions) {
  return {
    clients: o.clients ?? 24,
    minKillDelayMs: o.minKillDelayMs ?? 50,
    maxKillDelayMs: o.maxKillDelayMs ?? 600,
    gracefulShare: o.gracefulShare ?? 0.2,
    startupKillShare: o.startupKillShare ?? 0.15,
    compactAfterBytes: o.compactAfterBytes ?? 256 * 1024,
  }
}

export async function mapLimited<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await fn(items[i]!)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

// ---------------------------------------------------------------------------------------------
// One client: a customer and everything under it, written one request at a time

const LIMITS = { partners: 2, applications: 3, consumers: 6, installations: 6, enrollments: 10, tokens: 4 }

class Client {
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
      let res: ApiResponse
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
