#!/usr/bin/env bun
/**
 * Hand-run scale benchmark (issue 3; not a test). Does keyward keep its speed as the data grows?
 * Two data dirs: 10,000 and 1,000,000 enrollments (100,000 with --quick), spread over the 1,000
 * applications of one customer, plus a few small customers. For each:
 *
 *  1. builds the data dir THROUGH THE STORE (Store.open, initialiseStorage, store.commit with 1,000
 *     puts per transaction, records shaped as the services make them), in a child process so the
 *     bench itself stays small; closing the store writes the snapshot (bench/support/dataset.ts);
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
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import type { TableName } from '../src/store/database'
import { buildInChild, type BuildPlan, type CustomerPlan } from './support/dataset'
import { Children, freePort, onInterrupt, tailOf, waitReady } from './support/servers'
import { busyBeforeStart, cpuSeconds, procStatus } from './support/system'
import { runWrk as runWrkRaw } from './support/wrk'
import { watchSnapshots, type SnapshotActivity } from './support/snapshots'

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
const children = new Children()
let workDir: string | undefined

// ---------------------------------------------------------------------------------------------
// Building a data dir: bench/support/dataset.ts, in a child process

interface BuildMeta {
  readonly enrollments: number
  readonly vendorId: string
  readonly vendorToken: string
  readonly customerId: string
  /** Applications of the big customer, all with the one environment ENVIRONMENT. */
  readonly applicationIds: string[]
  readonly counts: Record<TableName, number>
  readonly loadSeconds: number
  readonly snapshotSeconds: number
  readonly snapshotBytes: number
}

/**
 * A few small customers (10 applications, N / 200 enrollments, at least 100), then the big one
 * (APPLICATIONS applications, N enrollments). Each consumer has 2 enrollments, each with its own
 * installation, in 2 applications; every 100th consumer also gets a consumer without enrollments
 * beside it (created by POST /api/consumers), so the consumers table is a little over N / 2.
 */
function scalePlan(dir: string, enrollments: number): BuildPlan {
  const customer = (description: string, applications: number, count: number): CustomerPlan => ({
    description,
    applications,
    enrollments: count,
    enrollmentsPerConsumer: 2,
    spareConsumerEvery: 100,
  })
  const others = Array.from({ length: OTHER_CUSTOMERS }, (_, o) => customer(`Other customer ${o + 1}`, 10, Math.max(100, Math.floor(enrollments / 200))))
  return { dir, label: enrollments.toLocaleString('en'), customers: [...others, customer('Big customer', APPLICATIONS, enrollments)] }
}

async function build(work: string, enrollments: number): Promise<BuildMeta> {
  const dir = join(work, `data-${enrollments}`)
  const built = await buildInChild(
    scalePlan(dir, enrollments),
    { planFile: join(work, `plan-${enrollments}.json`), metaFile: join(work, `meta-${enrollments}.json`), cwd: ROOT },
    (cmd, options) => children.spawn(cmd, options),
  )
  const big = built.customers[built.customers.length - 1]!
  return {
    enrollments,
    vendorId: built.vendorId,
    vendorToken: built.vendorToken,
    customerId: big.organizationId,
    applicationIds: big.applicationIds,
    counts: built.counts,
    loadSeconds: built.loadSeconds,
    snapshotSeconds: built.snapshotSeconds,
    snapshotBytes: built.snapshotBytes,
  }
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
    console.log(`building ${fmt(size)} enrollments through the store...`)
    metas.push(await build(work, size))
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
  const proc = children.spawn([BUN, ...profile, 'run', 'src/main.ts', 'serve', '--data', dir, '--port', String(port)], {
    cwd: SERVER_ROOT,
    stdout: 'ignore',
    stderr: Bun.file(stderrFile),
  })
  await waitReady(label, proc, `http://127.0.0.1:${port}/healthz`, { timeoutMs: 600_000, log: () => tailOf(stderrFile) })
  const startupSeconds = (performance.now() - started) / 1000
  const rssAtReady = await procStatus(proc.pid, 'VmRSS')

  const token = meta.vendorToken
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
  const snapshots = await watch.stop()
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

async function runWrk(wrk: string, wrkArgs: string[], env?: Record<string, string | undefined>): Promise<Omit<WrkResult, 'cpuMicros' | 'note' | 'snapshots'>> {
  const result = await runWrkRaw(wrk, wrkArgs, { env: env ?? process.env, timeoutSeconds: 10 })
  const out = result.output
  const posts = /scale-post: created=(\d+) other=(\d+) first_other_status=(\d+)/.exec(out)
  if (!posts && result.non2xx > 0) throw new Error(`wrk saw ${result.non2xx} non-2xx answers; the figures would be meaningless:\n${out}`)
  const errors = posts ? Number(posts[2]) : 0
  if (posts && errors > 0) console.warn(`  (${posts[2]} POSTs not answered 201; the first was ${posts[3]})`)
  const socketErrors = /Socket errors:.*/.exec(out)
  if (socketErrors) console.warn(`  (wrk: ${socketErrors[0]})`)
  return { seconds: result.seconds, rps: result.rps, meanMs: result.meanMs, p99Ms: result.p99Ms, requests: result.requests, errors }
}

const ms = (value: number) => (value < 1 ? `${(value * 1000).toFixed(0)} µs` : `${value.toFixed(2)} ms`)
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0)

function lowestCpu(runs: WrkResult[]): number | null {
  const values = runs.map((r) => r.cpuMicros)
  return values.includes(null) ? null : Math.min(...(values as number[]))
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

function machineLine(mode: string): string {
  const cpu = cpus()
  return (
    `${new Date().toISOString()} · ${mode} run (${WARMUP_SECONDS}s warm-up + ${RUN_SECONDS}s measured per run, ${ROUNDS} rounds, alternating sizes) · ` +
    `${cpu.length} × ${cpu[0]?.model.trim() ?? 'cpu'} · Bun ${Bun.version} · wrk -t${WRK_THREADS} · data dirs in ${tmpdir()}`
  )
}

// --- servers ---------------------------------------------------------------------------------

/** SIGTERM (keyward writes its snapshot and exits), SIGKILL after 60 s (a big snapshot takes a while). */
function stopAll(): Promise<void> {
  return children.stopAll({ signal: 'SIGTERM', graceMs: 60_000 })
}

// ---------------------------------------------------------------------------------------------

// Ctrl-C: stop the servers and builders before leaving.
onInterrupt(async () => {
  await stopAll()
  if (workDir) await rm(workDir, { recursive: true, force: true })
})
try {
  process.exitCode = await main()
} catch (error) {
  console.error(`bench/scale.ts: ${(error as Error)?.message ?? error}`)
  process.exitCode = 1
}
