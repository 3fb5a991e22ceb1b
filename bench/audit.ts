#!/usr/bin/env bun
/**
 * Hand-run benchmark of the audit trail (issue 11; not a test):
 *
 *  - resident memory per stored audit event, with N events loaded (default 1,000,000);
 *  - GET /api/audit-events?target_ids=X (X: a record with 3 events) with N events against 1,000.
 *
 * Each data dir is built THROUGH THE STORE in a child process: events made by the services' own
 * helper (`recordEvent`), in the mix an enrollment-heavy load makes (an enrollment with its new
 * consumer and installation, three events of one request; then suspensions and activations),
 * committed 1,000 per transaction; closing the store writes the snapshot. Then a fresh child
 * process loads the dir (as a restarted server does), measures its resident memory before and
 * after (after a full GC), and times the query through the app (`app.handle`, no network), as the
 * median of 5 rounds of 2,000 requests. Prints a report and writes it to bench/results/audit.md.
 *
 *   ./node_modules/.bin/bun run bench/audit.ts [--events N] [--keep]
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Store } from '../src/store/store'
import { EmbeddedStorage } from '../src/storage/embedded'
import { initialiseStorage } from '../src/cli/init'
import { recordEvent, type Actor, type AuditAction } from '../src/modules/shared/audit'
import { createApp } from '../src/app'
import { createLogger } from '../src/ops/logger'
import { TokenVerifier, tokenIdOf } from '../src/auth/tokens'
import { nowMicros } from '../src/store/clock'
import type { AuditEvent } from '../src/storage/records'
import type { Tx } from '../src/storage/storage'

const PER_TRANSACTION = 1_000
const SMALL = 1_000
const ROUNDS = 5
const REQUESTS = 2_000

interface Meta {
  readonly events: number
  readonly vendorToken: string
  /** A record with three events (create, suspend, activate). */
  readonly target: string
}

interface Measured {
  readonly events: number
  readonly rssBefore: number
  readonly rssAfter: number
  readonly loadSeconds: number
  /** Microseconds per GET /api/audit-events?target_ids=X, median of the rounds. */
  readonly queryMicros: number
  readonly listed: number
}

const [mode, ...rest] = process.argv.slice(2)
if (mode === 'build') await build(rest[0]!, Number(rest[1]))
else if (mode === 'measure') await measure(rest[0]!)
else await main(process.argv.slice(2))

// ---------------------------------------------------------------------------------------------

async function main(args: string[]): Promise<void> {
  const at = args.indexOf('--events')
  const large = at === -1 ? 1_000_000 : Number(args[at + 1])
  const work = await mkdtemp(join(tmpdir(), 'keyward-audit-bench-'))
  try {
    const results: Measured[] = []
    for (const events of [SMALL, large]) {
      const dir = join(work, `data-${events}`)
      const started = performance.now()
      await child(['build', dir, String(events)])
      console.log(`built ${events.toLocaleString('en')} events in ${((performance.now() - started) / 1000).toFixed(1)} s`)
      results.push(JSON.parse(await child(['measure', dir])) as Measured)
    }
    const report = render(results)
    console.log(report)
    await mkdir(join(import.meta.dir, 'results'), { recursive: true })
    await writeFile(join(import.meta.dir, 'results', 'audit.md'), report)
  } finally {
    if (!args.includes('--keep')) await rm(work, { recursive: true, force: true })
    else console.log(`kept ${work}`)
  }
}

async function child(args: string[]): Promise<string> {
  const proc = Bun.spawn([process.execPath, 'run', import.meta.path, ...args], { stdout: 'pipe', stderr: 'inherit' })
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited])
  if (code !== 0) throw new Error(`${args[0]} exited ${code}`)
  return out
}

function render([small, large]: Measured[]): string {
  const perEvent = (m: Measured) => (m.rssAfter - m.rssBefore) / m.events
  const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`
  return `# Audit trail benchmark (bench/audit.ts)

Machine: ${navigator.hardwareConcurrency} CPUs; ${new Date().toISOString().slice(0, 10)}.

| | ${small!.events.toLocaleString('en')} events | ${large!.events.toLocaleString('en')} events | target |
|---|---:|---:|---|
| resident memory after loading, above the empty process | ${mib(small!.rssAfter - small!.rssBefore)} | ${mib(large!.rssAfter - large!.rssBefore)} | |
| resident bytes per stored event | ${perEvent(small!).toFixed(0)} | **${perEvent(large!).toFixed(0)}** | < 256 at 1M |
| load (start-up) time | ${small!.loadSeconds.toFixed(2)} s | ${large!.loadSeconds.toFixed(2)} s | |
| GET /api/audit-events?target_ids=X (3 events), µs | ${small!.queryMicros.toFixed(1)} | ${large!.queryMicros.toFixed(1)} (**${(large!.queryMicros / small!.queryMicros).toFixed(2)}×**) | ≤ 2× |
`
}

// ---------------------------------------------------------------------------------------------
// build: the data dir, through the store

async function build(dir: string, events: number): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const store = await Store.open(dir, { compactAfterBytes: Number.MAX_SAFE_INTEGER, log: () => {} })
  const storage = new EmbeddedStorage(store)
  const { organization_id: vendorId, token: vendorToken } = await initialiseStorage(storage, 'Vendor', 'init')
  const vendor = storage.find('organizations', vendorId)!
  const customer = await storage.transaction((tx) =>
    tx.insert('organizations', { organization_id: crypto.randomUUID(), parent_id: vendorId, organization_type: 'customer', description: 'Customer', state: 'active', environments: null }),
  )
  const principal = { organization: vendor, role: 'admin' as const, customerId: null, tokenId: tokenIdOf(vendorToken)! }
  const application = crypto.randomUUID()

  // recordEvent through a transaction handle that only shapes the record as the storage would.
  let batch: AuditEvent[] = []
  let time = nowMicros()
  const capture = { insert: async (_: string, record: object) => (batch.push({ ...record, created: time, modified: time } as AuditEvent), batch.at(-1)) } as unknown as Tx
  const inFlight: Promise<unknown>[] = []
  const flush = async () => {
    const puts = batch
    batch = []
    inFlight.push(store.commit((tx) => puts.forEach((event) => tx.put('audit_events', event))))
    if (inFlight.length >= 8) await inFlight.shift()
  }
  let written = 0
  let target = ''
  const enrollments: { id: string; record: Record<string, unknown> }[] = []
  const event = async (actor: Actor, action: AuditAction, targetId: string, before: object | null, after: object) => {
    await recordEvent(capture, actor, action, { target: targetId, customerId: customer.organization_id, before, after })
    if (++written % PER_TRANSACTION === 0) await flush()
  }
  while (written < events) {
    time = nowMicros()
    const actor = { principal, traceId: crypto.randomUUID() }
    if (enrollments.length > 0 && written % 10 >= 6) {
      // A suspension or an activation of an earlier enrollment.
      const pick = enrollments[written % enrollments.length]!
      const before = pick.record
      const after = { ...before, state: before.state === 'active' ? 'suspended' : 'active', modified: time }
      await event(actor, before.state === 'active' ? 'enrollment.suspend' : 'enrollment.activate', pick.id, before, after)
      pick.record = after
      continue
    }
    const [consumer, installation, enrollment] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()]
    const stamps = { created: time, modified: time }
    await event(actor, 'consumer.create', consumer, null, { consumer_id: consumer, organization_id: customer.organization_id, state: 'active', ...stamps })
    await event(actor, 'installation.create', installation, null, { installation_id: installation, organization_id: customer.organization_id, description: `Device ${written}`, state: 'unregistered', ...stamps })
    const record = {
      enrollment_id: enrollment,
      organization_id: customer.organization_id,
      consumer_id: consumer,
      installation_id: installation,
      application_id: application,
      environment: 'PRODUCTION',
      active_keyset_id: null,
      client_enclave_key: null,
      state: 'active',
      ...stamps,
    }
    await event(actor, 'enrollment.create', enrollment, null, record)
    if (enrollments.length < 1000) enrollments.push({ id: enrollment, record })
  }
  if (batch.length > 0) await flush()
  await Promise.all(inFlight)
  // The target: one enrollment created, suspended and activated (3 events), in the middle of the data.
  target = crypto.randomUUID()
  await storage.transaction(async (tx) => {
    const base = { enrollment_id: target, organization_id: customer.organization_id, state: 'active' }
    const actor = { principal, traceId: crypto.randomUUID() }
    await recordEvent(tx, actor, 'enrollment.create', { target, customerId: customer.organization_id, before: null, after: base })
    await recordEvent(tx, actor, 'enrollment.suspend', { target, customerId: customer.organization_id, before: base, after: { ...base, state: 'suspended' } })
    await recordEvent(tx, actor, 'enrollment.activate', { target, customerId: customer.organization_id, before: { ...base, state: 'suspended' }, after: base })
  })
  await store.close()
  await writeFile(join(dir, 'bench-meta.json'), JSON.stringify({ events: store.tables.audit_events.size, vendorToken, target } satisfies Meta))
}

// ---------------------------------------------------------------------------------------------
// measure: a fresh process loads the dir, then queries it

async function measure(dir: string): Promise<void> {
  const meta = (await Bun.file(join(dir, 'bench-meta.json')).json()) as Meta
  Bun.gc(true)
  const rssBefore = process.memoryUsage().rss
  const started = performance.now()
  const store = await Store.open(dir, { readOnly: true, log: () => {} })
  const loadSeconds = (performance.now() - started) / 1000
  Bun.gc(true)
  const rssAfter = process.memoryUsage().rss
  const storage = new EmbeddedStorage(store)
  const app = createApp({ storage, verifier: new TokenVerifier(), config: { publicUrl: 'http://bench', autoVerifyInstallations: false }, logger: createLogger('json', () => {}) })
  const request = () => app.handle(new Request(`http://bench/api/audit-events?target_ids=${meta.target}`, { headers: { authorization: `Bearer ${meta.vendorToken}` } }))
  const first = await request()
  const listed = ((await first.json()) as { total: number }).total
  if (first.status !== 200 || listed !== 3) throw new Error(`the target query answered ${first.status} with ${listed} events`)
  const rounds: number[] = []
  for (let round = 0; round < ROUNDS + 1; round++) {
    const t0 = performance.now()
    for (let n = 0; n < REQUESTS; n++) await (await request()).text()
    if (round > 0) rounds.push(((performance.now() - t0) * 1000) / REQUESTS) // the first warms up
  }
  rounds.sort((a, b) => a - b)
  const result: Measured = { events: store.tables.audit_events.size, rssBefore, rssAfter, loadSeconds, queryMicros: rounds[Math.floor(rounds.length / 2)]!, listed }
  process.stdout.write(JSON.stringify(result))
}
