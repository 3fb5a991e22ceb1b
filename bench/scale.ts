#!/usr/bin/env bun
/**
 * Hand-run scale benchmark (issue 3; not a test). Does keyward keep its speed as the data grows?
 * Two data dirs: 10,000 and 1,000,000 enrollments (100,000 with --quick), spread over the 1,000
 * applications of one customer, plus a few small customers. For each:
 *
 *  1. builds the data dir THROUGH THE STORE (Store.open, initialiseStore, store.commit with 1,000
 *     puts per transaction, records shaped as the services make them), in a child process so the
 *     bench itself stays small; closing the store writes the snapshot;
 *  2. starts the real server on it (`bun run src/main.ts serve`), i.e. restarted from disk, and
 *     reports its start-up time until /healthz answers and its resident memory (VmRSS);
 *  3. measures with wrk, with a vendor admin token minted with the dir's secret:
 *       GET /api/enrollments?application_ids=<X>&page=1&page_size=100   4 connections
 *       GET /api/enrollments?application_ids=<X>&page=1&page_size=10    (same items at both sizes)
 *       GET /api/enrollments?page=50&page_size=100                       (100 items at both sizes)
 *       GET /api/consumers?page=5000&page_size=100                      4 connections (a smaller
 *           data set has fewer consumers: its deepest full page is used instead)
 *       POST /api/enrollments, fresh ids per request (bench/scale-post.lua)  64 connections, short
 *           runs, then one long run per size that includes the snapshots (compactions) a sustained
 *           write load causes
 *
 * Targets: list times at the large size no slower than 2× the small size; POST throughput at the
 * large size at least 80% of the small size. Both servers run side by side and each measurement
 * alternates between them (best of ROUNDS runs), so machine noise hits both alike. Beside the
 * targets it reports the server's CPU time per request, which other load disturbs much less. Prints
 * a report and writes it to bench/results/scale.md.
 *
 *   ./node_modules/.bin/bun run bench/scale.ts [--quick] [--large N] [--profile] [--server-root DIR]
 *
 * --server-root runs the server from another checkout (DIR/src/main.ts), to try a patch against the
 * same data; its report is printed but not written to bench/results.
 * --profile starts the servers under `bun --cpu-prof` and leaves the profiles in bench/results/prof/.
 * Needs `wrk` on the PATH, and several GB of memory for the large size.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, mkdir, rm, stat, writeFile } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import { Store } from '../src/store/store'
import type { Application, Consumer, Enrollment, Installation, Organization, RecordOf, TableName } from '../src/store/database'
import { nowMicros } from '../src/store/clock'
import { SNAPSHOT_FILE } from '../src/store/paths'
import { acquireDataDirLock } from '../src/store/lock'
import { initialiseStore } from '../src/cli/init'
import { readSecret } from '../src/auth/secret'
import { mintToken } from '../src/auth/tokens'

const args = process.argv.slice(2)
const QUICK = args.includes('--quick')
const PROFILE = args.includes('--profile')
const argValue = (name: string) => {
  const at = args.indexOf(name)
  return at === -1 ? undefined : args[at + 1]
}
const SMALL = 10_000
const LARGE = Number(argValue('--large') ?? (QUICK ? 100_000 : 1_000_000))
const APPLICATIONS = 1_000
const OTHER_CUSTOMERS = 3
const PUTS_PER_TRANSACTION = 1_000
const COMMITS_IN_FLIGHT = 8
const WARMUP_SECONDS = QUICK ? 1 : 2
const RUN_SECONDS = QUICK ? 3 : 5
/** One long POST run per size: long enough to include the snapshots a sustained write load causes. */
const SUSTAINED_SECONDS = QUICK ? 15 : 60
const ROUNDS = 3
const LIST_CLIENTS = 4
const POST_CLIENTS = 64
const CONSUMER_PAGE = 5_000
const ENVIRONMENT = 'PRODUCTION'
const TARGET_LIST_RATIO = 2
const TARGET_POST_RATIO = 0.8
const WRK_THREADS = Math.max(1, Math.floor(cpus().length / 2))

const ROOT = join(import.meta.dir, '..')
const SERVER_ROOT = argValue('--server-root') ?? ROOT
const BUN = process.execPath
const children: Subprocess[] = []
let workDir: string | undefined

// ---------------------------------------------------------------------------------------------
// Building a data dir (child process: `bun run bench/scale.ts --build DIR N META`)

interface BuildMeta {
  readonly enrollments: number
  readonly vendorId: string
  readonly customerId: string
  /** Applications of the big customer, all with the one environment ENVIRONMENT. */
  readonly applicationIds: string[]
  readonly counts: Record<TableName, number>
  readonly loadSeconds: number
  readonly snapshotSeconds: number
  readonly snapshotBytes: number
}

async function build(dir: string, enrollments: number, metaFile: string): Promise<void> {
  const log = (line: string) => console.error(`  [build ${enrollments.toLocaleString('en')}] ${line}`)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const lock = acquireDataDirLock(dir)
  const started = performance.now()
  // No compaction while loading (every 64 MiB it would rewrite the whole snapshot): one at close.
  const store = await Store.open(dir, { compactAfterBytes: Number.MAX_SAFE_INTEGER, log })
  const { organization_id: vendorId } = await initialiseStore(store, 'Vendor')

  let batch: [TableName, unknown][] = []
  const inFlight: Promise<unknown>[] = []
  const flush = async () => {
    if (batch.length === 0) return
    const puts = batch
    batch = []
    inFlight.push(
      store.commit((tx) => {
        for (const [table, record] of puts) tx.put(table, record as never)
      }),
    )
    if (inFlight.length >= COMMITS_IN_FLIGHT) await inFlight.shift()
  }
  const put = async <N extends TableName>(table: N, record: RecordOf<N>) => {
    batch.push([table, record])
    if (batch.length >= PUTS_PER_TRANSACTION) await flush()
  }

  // As OrganizationService.create: a customer of the vendor, no virtual environments.
  const customer = (description: string): Organization => {
    const now = nowMicros()
    return {
      organization_id: crypto.randomUUID(),
      parent_id: vendorId,
      organization_type: 'customer',
      description,
      state: 'active',
      environments: null,
      created: now,
      modified: now,
    }
  }
  // As ApplicationService.create: the customer's default environment, an api_key stored as a hash.
  const application = (owner: Organization, i: number): Application => {
    const now = nowMicros()
    return {
      application_id: crypto.randomUUID(),
      organization_id: owner.organization_id,
      description: `Application ${i}`,
      environments: [ENVIRONMENT],
      state: 'active',
      api_key_hash: createHash('sha256').update(`kwk_${randomBytes(24).toString('base64url')}`).digest('hex'),
      created: now,
      modified: now,
    }
  }
  // As ConsumerService.createIn, InstallationService.createIn (not auto-verified) and EnrollmentService.create.
  const consumer = (owner: Organization): Consumer => {
    const now = nowMicros()
    return { consumer_id: crypto.randomUUID(), organization_id: owner.organization_id, state: 'active', created: now, modified: now }
  }
  const installation = (owner: Organization, n: number): Installation => {
    const now = nowMicros()
    return {
      installation_id: crypto.randomUUID(),
      organization_id: owner.organization_id,
      description: `Device ${n}`,
      state: 'unregistered',
      created: now,
      modified: now,
    }
  }
  const enrollment = (owner: Organization, c: Consumer, i: Installation, app: Application): Enrollment => {
    const now = nowMicros()
    return {
      enrollment_id: crypto.randomUUID(),
      organization_id: owner.organization_id,
      consumer_id: c.consumer_id,
      installation_id: i.installation_id,
      application_id: app.application_id,
      environment: ENVIRONMENT,
      active_keyset_id: null,
      client_enclave_key: null,
      state: 'active',
      created: now,
      modified: now,
    }
  }

  /**
   * `count` enrollments over `apps`: each consumer has 2 enrollments, each with its own installation,
   * in 2 applications; every 100th consumer also gets a consumer without enrollments beside it
   * (created by POST /api/consumers), so the consumers table is a little over count / 2.
   */
  const enrollMany = async (owner: Organization, apps: Application[], count: number) => {
    let n = 0
    let c = 0
    while (n < count) {
      const who = consumer(owner)
      await put('consumers', who)
      for (let k = 0; k < 2 && n < count; k++, n++) {
        const device = installation(owner, n)
        await put('installations', device)
        await put('enrollments', enrollment(owner, who, device, apps[n % apps.length]!))
      }
      if (++c % 100 === 0) await put('consumers', consumer(owner))
      if (n % 100_000 === 0) log(`${n.toLocaleString('en')} enrollments, ${((performance.now() - started) / 1000).toFixed(1)} s`)
    }
  }

  // A few small customers first, then the big one.
  for (let o = 1; o <= OTHER_CUSTOMERS; o++) {
    const other = customer(`Other customer ${o}`)
    await put('organizations', other)
    const apps: Application[] = []
    for (let a = 0; a < 10; a++) {
      const app = application(other, a)
      apps.push(app)
      await put('applications', app)
    }
    await enrollMany(other, apps, Math.max(100, Math.floor(enrollments / 200)))
  }
  const big = customer('Big customer')
  await put('organizations', big)
  const apps: Application[] = []
  for (let a = 0; a < APPLICATIONS; a++) {
    const app = application(big, a)
    apps.push(app)
    await put('applications', app)
  }
  await enrollMany(big, apps, enrollments)
  await flush()
  await Promise.all(inFlight)
  const loaded = performance.now()
  const counts = Object.fromEntries(Object.entries(store.tables).map(([name, table]) => [name, table.size])) as Record<TableName, number>
  log(`loaded ${Object.entries(counts).map(([k, v]) => `${v.toLocaleString('en')} ${k}`).join(', ')} in ${((loaded - started) / 1000).toFixed(1)} s; writing the snapshot`)
  await store.close()
  lock.release()
  const closed = performance.now()
  const snapshotBytes = (await stat(join(dir, SNAPSHOT_FILE))).size
  log(`snapshot ${(snapshotBytes / 2 ** 20).toFixed(0)} MiB written in ${((closed - loaded) / 1000).toFixed(1)} s`)
  const meta: BuildMeta = {
    enrollments,
    vendorId,
    customerId: big.organization_id,
    applicationIds: apps.map((a) => a.application_id),
    counts,
    loadSeconds: (loaded - started) / 1000,
    snapshotSeconds: (closed - loaded) / 1000,
    snapshotBytes,
  }
  await Bun.write(metaFile, JSON.stringify(meta))
}

// ---------------------------------------------------------------------------------------------
// The benchmark

interface Server {
  readonly label: string
  readonly meta: BuildMeta
  readonly dir: string
  readonly proc: Subprocess
  readonly port: number
  readonly auth: string
  readonly token: string
  readonly startupSeconds: number
  readonly rssAtReady: number
  readonly consumerPage: number
  readonly measuredApp: string
  readonly appsFile: string
}

interface WrkResult {
  readonly seconds: number
  readonly rps: number
  readonly meanMs: number
  readonly p99Ms: number
  readonly requests: number
  readonly cpuMicros: number | null
  readonly errors: number
  readonly snapshots: SnapshotActivity
  readonly note: string
}

/** Snapshots (compactions) seen during a run: started = temp file appeared, finished = file replaced. */
interface SnapshotActivity {
  readonly started: number
  readonly finished: number
  /** A snapshot was being written at some point of the run. */
  readonly busy: boolean
}

interface Measurement {
  readonly name: string
  readonly clients: number
  readonly runs: Map<Server, WrkResult[]>
}

async function main(): Promise<number> {
  const wrk = Bun.which('wrk')
  if (!wrk) {
    console.error('bench/scale.ts needs wrk, the HTTP load generator. Install it with:\n\n  apt-get update && apt-get install -y wrk\n')
    return 1
  }
  if (!Number.isInteger(LARGE) || LARGE < SMALL) {
    console.error(`--large must be a whole number of at least ${SMALL}`)
    return 2
  }
  const work = await mkdtemp(join(tmpdir(), 'keyward-scale-'))
  workDir = work
  try {
    return await run(wrk, work)
  } finally {
    await stopAll()
    await rm(work, { recursive: true, force: true })
  }
}

async function run(wrk: string, work: string): Promise<number> {
  const mode = QUICK ? 'quick' : 'full'
  const fmt = (n: number) => n.toLocaleString('en')
  console.log(
    `keyward scale benchmark (${mode}: ${fmt(SMALL)} vs ${fmt(LARGE)} enrollments over ${fmt(APPLICATIONS)} applications; ` +
      `${WARMUP_SECONDS}s warm-up + ${RUN_SECONDS}s per run, ${ROUNDS} rounds, wrk -t${WRK_THREADS})`,
  )
  const busy = await busyBeforeStart()
  if (busy) console.log(`CPU busy before start (other processes): ${busy} of all cores`)

  // 1. Build both data dirs, one after the other, each in its own process.
  const metas: BuildMeta[] = []
  for (const size of [SMALL, LARGE]) {
    const dir = join(work, `data-${size}`)
    const metaFile = join(work, `meta-${size}.json`)
    console.log(`building ${fmt(size)} enrollments through the store...`)
    const proc = Bun.spawn([BUN, 'run', import.meta.path, '--build', dir, String(size), metaFile], {
      cwd: ROOT,
      stdout: 'inherit',
      stderr: 'inherit',
    })
    children.push(proc)
    if ((await proc.exited) !== 0) throw new Error(`building the ${fmt(size)} data dir failed (exit ${proc.exitCode})`)
    children.splice(children.indexOf(proc), 1)
    metas.push(JSON.parse(await Bun.file(metaFile).text()) as BuildMeta)
  }

  // 2. Start each server on its dir (one at a time, so start-up times are not disturbed).
  const servers: Server[] = []
  for (const meta of metas) servers.push(await startServer(work, meta))
  // After /healthz answers, the big server still collects the garbage of loading for a while.
  const settleSeconds = new Map<Server, number>()
  for (const s of servers) {
    settleSeconds.set(s, await settle(s))
    console.log(
      `${s.label}: start-up ${s.startupSeconds.toFixed(2)} s, VmRSS ${mib(s.rssAtReady)} MiB; ` +
        `busy for ${settleSeconds.get(s)!.toFixed(0)} s more (VmRSS then ${mib(await procStatus(s.proc.pid, 'VmRSS'))} MiB)`,
    )
  }
  await checkAnswers(servers)

  // 3. Measure, alternating between the sizes.
  const listQueries = [
    { short: 'GET enrollments ps=100', name: 'GET /api/enrollments?application_ids=X&page=1&page_size=100', path: (s: Server) => `/api/enrollments?application_ids=${s.measuredApp}&page=1&page_size=100` },
    { short: 'GET enrollments ps=10', name: 'GET /api/enrollments?application_ids=X&page=1&page_size=10', path: (s: Server) => `/api/enrollments?application_ids=${s.measuredApp}&page=1&page_size=10` },
    { short: 'GET enrollments p50', name: 'GET /api/enrollments?page=50&page_size=100', path: () => '/api/enrollments?page=50&page_size=100' },
    { short: 'GET consumers page P', name: 'GET /api/consumers?page=P&page_size=100', path: (s: Server) => `/api/consumers?page=${s.consumerPage}&page_size=100` },
  ]
  const lists: Measurement[] = []
  for (const query of listQueries) {
    const m: Measurement = { name: query.name, clients: LIST_CLIENTS, runs: new Map(servers.map((s) => [s, []])) }
    lists.push(m)
    for (let round = 1; round <= ROUNDS; round++) {
      for (const s of servers) {
        const wrkArgs = ['-c', String(LIST_CLIENTS), '-H', `Authorization: ${s.auth}`, `http://127.0.0.1:${s.port}${query.path(s)}`]
        m.runs.get(s)!.push(await measure(wrk, `${query.short} ${s.label} r${round}`, s, wrkArgs))
      }
    }
  }

  const post: Measurement = { name: 'POST /api/enrollments (fresh ids)', clients: POST_CLIENTS, runs: new Map(servers.map((s) => [s, []])) }
  const postArgs = (s: Server) => (nonce: number) => [
    '-c', String(POST_CLIENTS), '-s', join(import.meta.dir, 'scale-post.lua'), `http://127.0.0.1:${s.port}/api/enrollments`,
    '--', s.appsFile, String(nonce), ENVIRONMENT,
  ]
  for (let round = 1; round <= ROUNDS; round++) {
    for (const s of servers) {
      post.runs.get(s)!.push(await measure(wrk, `POST ${s.label} r${round}`, s, postArgs(s), { ...process.env, KEYWARD_TOKEN: s.token }))
    }
  }
  const sustained: Measurement = {
    name: `POST /api/enrollments, sustained ${SUSTAINED_SECONDS} s`,
    clients: POST_CLIENTS,
    runs: new Map(servers.map((s) => [s, []])),
  }
  for (const s of servers) {
    sustained.runs.get(s)!.push(
      await measure(wrk, `POST ${s.label} ${SUSTAINED_SECONDS}s`, s, postArgs(s), { ...process.env, KEYWARD_TOKEN: s.token }, { warmup: 0, seconds: SUSTAINED_SECONDS }),
    )
  }

  const finalEnrollments = new Map<Server, number>()
  for (const s of servers) {
    const response = await fetch(`http://127.0.0.1:${s.port}/api/enrollments?page_size=1`, { headers: { authorization: s.auth } })
    finalEnrollments.set(s, ((await response.json()) as { total: number }).total)
  }
  const memoryAfter = await Promise.all(servers.map(async (s) => ({ rss: await procStatus(s.proc.pid, 'VmRSS'), hwm: await procStatus(s.proc.pid, 'VmHWM') })))

  // 4. Report.
  const [small, large] = servers as [Server, Server]
  const bestLatency = (m: Measurement, s: Server) => Math.min(...m.runs.get(s)!.map((r) => r.meanMs))
  const bestP99 = (m: Measurement, s: Server) => Math.min(...m.runs.get(s)!.map((r) => r.p99Ms))
  const bestRps = (m: Measurement, s: Server) => Math.max(...m.runs.get(s)!.map((r) => r.rps))
  const lines: string[] = []
  lines.push('## Data and start-up', '')
  lines.push('| | ' + servers.map((s) => s.label).join(' | ') + ' |', '| --- | ' + servers.map(() => '---:').join(' | ') + ' |')
  const row = (name: string, cells: string[]) => lines.push(`| ${name} | ${cells.join(' | ')} |`)
  for (const table of ['organizations', 'applications', 'consumers', 'installations', 'enrollments'] as TableName[]) {
    row(table, servers.map((s) => fmt(s.meta.counts[table])))
  }
  row('load through the store (1,000 puts per transaction)', servers.map((s) => `${s.meta.loadSeconds.toFixed(1)} s`))
  row('snapshot written at close', servers.map((s) => `${s.meta.snapshotSeconds.toFixed(1)} s, ${mib(s.meta.snapshotBytes)} MiB`))
  row('server start-up until /healthz answers', servers.map((s) => `**${s.startupSeconds.toFixed(2)} s**`))
  row('VmRSS when ready', servers.map((s) => `**${mib(s.rssAtReady)} MiB**`))
  row('then busy (collecting the garbage of loading) for', servers.map((s) => `${settleSeconds.get(s)!.toFixed(0)} s`))
  row('VmRSS / VmHWM after the runs', memoryAfter.map((m) => `${mib(m.rss)} / ${mib(m.hwm)} MiB`))
  lines.push('')

  lines.push('## Measurements (best of each side; every run in brackets)', '')
  lines.push(`| request | clients | ${servers.map((s) => `${s.label}: mean / p99 / req/s`).join(' | ')} | server CPU per request |`)
  lines.push(`| --- | ---: | ${servers.map(() => '---:').join(' | ')} | ---: |`)
  for (const m of lists) {
    const cells = servers.map(
      (s) =>
        `**${ms(bestLatency(m, s))}** / ${ms(bestP99(m, s))} / ${bestRps(m, s).toFixed(0)} ` +
        `(${m.runs.get(s)!.map((r) => `${ms(r.meanMs)}, ${ms(r.p99Ms)}, ${r.rps.toFixed(0)}`).join('; ')})`,
    )
    const cpu = servers.map((s) => lowestCpu(m.runs.get(s)!)).map((c) => (c === null ? '?' : `${c.toFixed(0)} µs`))
    lines.push(`| ${m.name} | ${m.clients} | ${cells.join(' | ')} | ${cpu.join(' → ')} |`)
  }
  for (const m of [post, sustained]) {
    const cells = servers.map(
      (s) =>
        `${ms(bestLatency(m, s))} / ${ms(bestP99(m, s))} / **${bestRps(m, s).toFixed(0)}** ` +
        `(${m.runs.get(s)!.map((r) => `${r.rps.toFixed(0)}${r.note}`).join('; ')})`,
    )
    const cpu = servers.map((s) => lowestCpu(m.runs.get(s)!)).map((c) => (c === null ? '?' : `${c.toFixed(0)} µs`))
    lines.push(`| ${m.name} | ${m.clients} | ${cells.join(' | ')} | ${cpu.join(' → ')} |`)
  }
  lines.push('')
  lines.push(
    `X is one application of the big customer (${fmt(Math.floor(small.meta.enrollments / APPLICATIONS))} enrollments at ${small.label}, ` +
      `${fmt(Math.floor(large.meta.enrollments / APPLICATIONS))} at ${large.label}), so page_size=100 returns ` +
      `${Math.min(100, Math.floor(small.meta.enrollments / APPLICATIONS))} vs ${Math.min(100, Math.floor(large.meta.enrollments / APPLICATIONS))} items; ` +
      `page_size=10 returns 10 at both sizes (same work per page), and so does the unfiltered page 50 of 100. P is the consumer page: ` +
      servers.map((s) => `${s.consumerPage} at ${s.label}`).join(', ') +
      ` (the deepest full page, at most ${CONSUMER_PAGE}). The vendor admin sees every customer's consumers.`,
  )
  lines.push('')

  lines.push('## Targets', '')
  const cpuRatio = (m: Measurement) => {
    const [a, b] = [lowestCpu(m.runs.get(small)!), lowestCpu(m.runs.get(large)!)]
    return a === null || b === null ? '?' : `${(b / a).toFixed(2)}×`
  }
  lines.push(
    `| ratio (${large.label} vs ${small.label}) | measured | target | | server CPU per request (not a target; steadier under other load) |`,
    '| --- | ---: | ---: | --- | ---: |',
  )
  let allMet = true
  for (const m of lists) {
    const ratio = bestLatency(m, large) / bestLatency(m, small)
    const ok = ratio <= TARGET_LIST_RATIO
    allMet &&= ok
    const p99 = bestP99(m, large) / bestP99(m, small)
    lines.push(`| ${m.name}: mean latency | **${ratio.toFixed(2)}×** (p99 ${p99.toFixed(2)}×) | ≤ ${TARGET_LIST_RATIO}× | ${ok ? 'met' : 'MISSED'} | ${cpuRatio(m)} |`)
  }
  for (const m of [post, sustained]) {
    const ratio = bestRps(m, large) / bestRps(m, small)
    const ok = ratio >= TARGET_POST_RATIO
    allMet &&= ok
    lines.push(`| ${m.name}: throughput | **${(ratio * 100).toFixed(0)}%** | ≥ ${TARGET_POST_RATIO * 100}% | ${ok ? 'met' : 'MISSED'} | ${cpuRatio(m)} |`)
  }
  lines.push(
    '',
    `Snapshots: the server compacts (writes a full snapshot of all its data) once its log has grown enough (see compactAfterBytes ` +
      `in src/store/store.ts; an enrollment POST logs about 1 KB); "(snapshot)" after a run means one was being written during it. ` +
      `The POST runs also grow both data sets: ${servers.map((s) => `${s.label} ended with ${fmt(finalEnrollments.get(s)!)} enrollments`).join(', ')}. ` +
      `Sustained runs: ` +
      servers.map((s) => {
        const a = sustained.runs.get(s)![0]!.snapshots
        return `${s.label} ${a.started} started, ${a.finished} finished`
      }).join('; ') + '.',
  )
  const postErrors = [...post.runs.values(), ...sustained.runs.values()].flat().reduce((sum, r) => sum + r.errors, 0)
  lines.push('', postErrors === 0 ? 'Every POST was answered 201.' : `**${fmt(postErrors)} POSTs were not answered 201: the POST figures are not valid.**`)

  const report = lines.join('\n') + '\n'
  console.log('\n' + report)
  if (SERVER_ROOT !== ROOT) {
    console.log(`server run from ${SERVER_ROOT}: report not written to bench/results`)
    return allMet && postErrors === 0 ? 0 : 3
  }
  await mkdir(join(import.meta.dir, 'results'), { recursive: true })
  await Bun.write(
    join(import.meta.dir, 'results', 'scale.md'),
    `# keyward scale benchmark (issue 3)\n\n${machineLine(mode)}${busy ? ` · CPU busy before start: ${busy}` : ''}\n\n${report}`,
  )
  console.log('written to bench/results/scale.md')
  return allMet && postErrors === 0 ? 0 : 3
}

async function startServer(work: string, meta: BuildMeta): Promise<Server> {
  const label = meta.enrollments >= 1_000_000 ? `${meta.enrollments / 1_000_000}M` : `${meta.enrollments / 1000}k`
  const dir = join(work, `data-${meta.enrollments}`)
  const port = await freePort()
  const profile = PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${join(import.meta.dir, 'results', 'prof')}`, `--cpu-prof-name=server-${label}.cpuprofile`] : []
  const stderrFile = join(work, `server-${meta.enrollments}.stderr`)
  console.log(`starting the server on the ${label} dir (restart from disk)...`)
  const started = performance.now()
  const proc = Bun.spawn([BUN, ...profile, 'run', 'src/main.ts', 'serve', '--data', dir, '--port', String(port)], {
    cwd: SERVER_ROOT,
    stdout: 'ignore',
    stderr: Bun.file(stderrFile),
  })
  children.push(proc)
  await waitHealthy(label, proc, port, stderrFile)
  const startupSeconds = (performance.now() - started) / 1000
  const rssAtReady = await procStatus(proc.pid, 'VmRSS')

  const secret = await readSecret(dir)
  if (!secret) throw new Error(`${dir} has no secret`)
  const token = mintToken(secret, { org: meta.vendorId, role: 'admin', exp: Math.floor(Date.now() / 1000) + 86400 })
  const appsFile = join(work, `apps-${meta.enrollments}.txt`)
  await writeFile(appsFile, meta.applicationIds.join('\n') + '\n')
  const totalConsumers = meta.counts.consumers
  return {
    label,
    meta,
    dir,
    proc,
    port,
    auth: `Bearer ${token}`,
    token,
    startupSeconds,
    rssAtReady,
    consumerPage: Math.min(CONSUMER_PAGE, Math.floor(totalConsumers / 100)),
    measuredApp: meta.applicationIds[APPLICATIONS / 2]!,
    appsFile,
  }
}

/** One request of each kind through fetch: right status, right number of items. */
async function checkAnswers(servers: Server[]): Promise<void> {
  for (const s of servers) {
    const get = async (path: string) => {
      const response = await fetch(`http://127.0.0.1:${s.port}${path}`, { headers: { authorization: s.auth } })
      if (response.status !== 200) throw new Error(`${s.label}: GET ${path} answered ${response.status}: ${await response.text()}`)
      return (await response.json()) as Record<string, unknown>
    }
    const perApp = Math.floor(s.meta.enrollments / APPLICATIONS)
    const enrollments = await get(`/api/enrollments?application_ids=${s.measuredApp}&page=1&page_size=100`)
    const items = (enrollments.enrollments as unknown[]).length
    if (items !== Math.min(100, perApp) || enrollments.total !== perApp) {
      throw new Error(`${s.label}: enrollment list gave ${items} items of ${enrollments.total}, expected ${Math.min(100, perApp)} of ${perApp}`)
    }
    const unfiltered = await get('/api/enrollments?page=50&page_size=100')
    if ((unfiltered.enrollments as unknown[]).length !== 100) {
      throw new Error(`${s.label}: enrollment page 50 has ${(unfiltered.enrollments as unknown[]).length} items, expected 100`)
    }
    const consumers = await get(`/api/consumers?page=${s.consumerPage}&page_size=100`)
    if ((consumers.consumers as unknown[]).length !== 100) {
      throw new Error(`${s.label}: consumer page ${s.consumerPage} has ${(consumers.consumers as unknown[]).length} items, expected 100`)
    }
    const created = await fetch(`http://127.0.0.1:${s.port}/api/enrollments`, {
      method: 'POST',
      headers: { authorization: s.auth, 'content-type': 'application/json' },
      body: JSON.stringify({
        enrollment_id: crypto.randomUUID(),
        consumer_id: crypto.randomUUID(),
        installation_id: crypto.randomUUID(),
        application_id: s.meta.applicationIds[0],
        environment: ENVIRONMENT,
        installation_description: 'check',
      }),
    })
    if (created.status !== 201) throw new Error(`${s.label}: POST /api/enrollments answered ${created.status}: ${await created.text()}`)
    console.log(`${s.label}: answers check out (enrollments ${items} of ${enrollments.total}; consumer page ${s.consumerPage} of ${consumers.total} full; POST 201)`)
  }
}

/** One warm-up run (discarded), then the measured run, watching the data dir for snapshots meanwhile. */
async function measure(
  wrk: string,
  label: string,
  server: Server,
  wrkArgs: string[] | ((nonce: number) => string[]),
  env?: Record<string, string | undefined>,
  timing: { warmup: number; seconds: number } = { warmup: WARMUP_SECONDS, seconds: RUN_SECONDS },
): Promise<WrkResult> {
  const argsFor = () => (typeof wrkArgs === 'function' ? wrkArgs(1 + Math.floor(Math.random() * 0x7ffffff0)) : wrkArgs)
  if (timing.warmup > 0) await runWrk(wrk, [`-d${timing.warmup}s`, ...argsFor()], env)
  const watch = watchSnapshots(server.dir)
  const cpuBefore = await cpuSeconds(server.proc.pid)
  const result = await runWrk(wrk, [`-d${timing.seconds}s`, '--latency', ...argsFor()], env)
  const cpuAfter = await cpuSeconds(server.proc.pid)
  const snapshots = await watch()
  const cpuMicros = cpuBefore !== null && cpuAfter !== null ? ((cpuAfter - cpuBefore) / result.requests) * 1e6 : null
  const note = (snapshots.busy ? ' (snapshot)' : '') + (result.errors > 0 ? ` (${result.errors} not 201)` : '')
  console.log(
    `  ${label.padEnd(34)} ${result.rps.toFixed(0).padStart(7)} req/s   mean ${ms(result.meanMs).padEnd(9)} p99 ${ms(result.p99Ms).padEnd(9)}` +
      (cpuMicros !== null ? ` server CPU ${cpuMicros.toFixed(0)} µs/req` : '') +
      (snapshots.busy ? ` snapshots: ${snapshots.started} started, ${snapshots.finished} finished (or in progress)` : '') +
      (result.errors > 0 ? ` (${result.errors} not 201)` : ''),
  )
  return { ...result, cpuMicros, snapshots, note }
}

/** Polls the data dir until the returned function is called; a snapshot is written to a temp file, then renamed. */
function watchSnapshots(dir: string): () => Promise<SnapshotActivity> {
  let started = 0
  let finished = 0
  let busy = false
  let writing = false
  let mtime: number | null | undefined
  let stopped = false
  const poll = async () => {
    const [current, temp] = await Promise.all([snapshotMtime(dir), Bun.file(join(dir, `${SNAPSHOT_FILE}.tmp`)).exists()])
    if (mtime !== undefined && current !== mtime) {
      finished++
      busy = true
    }
    mtime = current
    if (temp && !writing) started++
    if (temp) busy = true
    writing = temp
  }
  const loop = (async () => {
    while (!stopped) {
      await poll()
      await Bun.sleep(100)
    }
    await poll()
  })()
  return async () => {
    stopped = true
    await loop
    return { started, finished, busy }
  }
}

async function runWrk(wrk: string, wrkArgs: string[], env?: Record<string, string | undefined>): Promise<Omit<WrkResult, 'cpuMicros' | 'note' | 'snapshots'>> {
  const threads = Math.min(WRK_THREADS, Number(wrkArgs[wrkArgs.indexOf('-c') + 1]))
  const proc = Bun.spawn([wrk, `-t${threads}`, '--timeout', '10s', ...wrkArgs], { stdout: 'pipe', stderr: 'pipe', env })
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)
  if (code !== 0 || !rps) throw new Error(`wrk failed (exit ${code}):\n${out}${err}`)
  const posts = /scale-post: created=(\d+) other=(\d+) first_other_status=(\d+)/.exec(out)
  const bad = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out)
  if (!posts && bad) throw new Error(`wrk saw ${bad[1]} non-2xx answers; the figures would be meaningless:\n${out}`)
  const errors = posts ? Number(posts[2]) : 0
  if (posts && errors > 0) console.warn(`  (${posts[2]} POSTs not answered 201; the first was ${posts[3]})`)
  const socketErrors = /Socket errors:.*/.exec(out)
  if (socketErrors) console.warn(`  (wrk: ${socketErrors[0]})`)
  const latency = /^\s+Latency\s+(\S+)/m.exec(out)?.[1]
  const p99 = /^\s+99%\s+(\S+)/m.exec(out)?.[1]
  return {
    seconds: Number(/requests in ([\d.]+)s/.exec(out)?.[1] ?? NaN),
    rps: Number(rps[1]),
    meanMs: latency ? toMs(latency) : NaN,
    p99Ms: p99 ? toMs(p99) : NaN,
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? 0),
    errors,
  }
}

/** wrk's `635.91us`, `1.23ms`, `2.01s`, `1.50m` → milliseconds. */
function toMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s|m)$/.exec(text)
  if (!match) return NaN
  const value = Number(match[1])
  return value * { us: 0.001, ms: 1, s: 1000, m: 60_000 }[match[2] as 'us' | 'ms' | 's' | 'm']
}

const ms = (value: number) => (value < 1 ? `${(value * 1000).toFixed(0)} µs` : `${value.toFixed(2)} ms`)
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0)

function lowestCpu(runs: WrkResult[]): number | null {
  const values = runs.map((r) => r.cpuMicros)
  return values.includes(null) ? null : Math.min(...(values as number[]))
}

/** User + system CPU seconds of a process so far (Linux /proc; null elsewhere). */
async function cpuSeconds(pid: number): Promise<number | null> {
  try {
    const fields = (await Bun.file(`/proc/${pid}/stat`).text()).split(') ')[1]!.split(' ')
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return null
  }
}

/** A `kB` field of /proc/<pid>/status, in bytes (NaN if unreadable). */
async function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(await Bun.file(`/proc/${pid}/status`).text())
    return match ? Number(match[1]) * 1024 : NaN
  } catch {
    return NaN
  }
}

async function snapshotMtime(dir: string): Promise<number | null> {
  try {
    return (await stat(join(dir, SNAPSHOT_FILE))).mtimeMs
  } catch {
    return null
  }
}

/**
 * Seconds after /healthz until the server's CPU use over one second falls below a tenth of a core
 * (at most 120 s), so measurements do not start in the middle of its first big collections.
 */
async function settle(s: Server): Promise<number> {
  const started = performance.now()
  for (;;) {
    const before = await cpuSeconds(s.proc.pid)
    await Bun.sleep(1000)
    const after = await cpuSeconds(s.proc.pid)
    const elapsed = (performance.now() - started) / 1000
    if (before === null || after === null || after - before < 0.1 || elapsed > 120) return Math.max(0, elapsed - 1)
  }
}

/** Share of all cores busy over one second before we start anything (Linux only; null elsewhere). */
async function busyBeforeStart(): Promise<string | null> {
  const sample = async () => {
    const fields = (await Bun.file('/proc/stat').text()).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
    return { idle: fields[3]! + fields[4]!, total: fields.reduce((a, b) => a + b, 0) }
  }
  try {
    const a = await sample()
    await Bun.sleep(1000)
    const b = await sample()
    return `${(100 - ((b.idle - a.idle) / (b.total - a.total)) * 100).toFixed(0)}%`
  } catch {
    return null
  }
}

function machineLine(mode: string): string {
  const cpu = cpus()
  return (
    `${new Date().toISOString()} · ${mode} run (${WARMUP_SECONDS}s warm-up + ${RUN_SECONDS}s measured per run, ${ROUNDS} rounds, alternating sizes) · ` +
    `${cpu.length} × ${cpu[0]?.model.trim() ?? 'cpu'} · Bun ${Bun.version} · wrk -t${WRK_THREADS} · data dirs in ${tmpdir()}`
  )
}

// --- servers ---------------------------------------------------------------------------------

/** Polls /healthz until it answers 200; fails fast if the server exits. */
async function waitHealthy(name: string, proc: Subprocess, port: number, stderrFile: string, timeoutMs = 600_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  const logText = () => Bun.file(stderrFile).text().catch(() => '(no log)')
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`${name} exited with code ${proc.exitCode} before it was ready:\n${await logText()}`)
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(1000) })).ok) return
    } catch {
      // not listening yet
    }
    await Bun.sleep(20)
  }
  throw new Error(`${name} did not answer /healthz within ${timeoutMs / 1000}s:\n${await logText()}`)
}

/** SIGTERM (keyward writes its snapshot and exits), SIGKILL after 60 s (a big snapshot takes a while). */
async function stopAll(): Promise<void> {
  await Promise.all(
    children.splice(0).map(async (proc) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return
      proc.kill('SIGTERM')
      const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000)
      await proc.exited
      clearTimeout(timer)
    }),
  )
}

async function freePort(): Promise<number> {
  const probe = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response() })
  const port = probe.port!
  await probe.stop(true)
  return port
}

// ---------------------------------------------------------------------------------------------

if (args[0] === '--build') {
  const [, dir, size, metaFile] = args
  try {
    await build(dir!, Number(size), metaFile!)
  } catch (error) {
    console.error(`bench/scale.ts --build: ${(error as Error)?.stack ?? error}`)
    process.exitCode = 1
  }
} else {
  // Ctrl-C: stop the servers and builders before leaving.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () =>
      void stopAll()
        .then(() => (workDir ? rm(workDir, { recursive: true, force: true }) : undefined))
        .finally(() => process.exit(130)),
    )
  }
  try {
    process.exitCode = await main()
  } catch (error) {
    console.error(`bench/scale.ts: ${(error as Error)?.message ?? error}`)
    process.exitCode = 1
  }
}
