#!/usr/bin/env bun
/**
 * The benchmark against keyward's limits (`npm run bench`, `npm run bench -- --quick`): keyward against
 * its limits, in one run on this machine, with wrk as the load generator on one thread.
 *
 * Embedded store (default; writes docs/benchmarks.md and docs/benchmarks.svg): data sets of 1,000,
 * 100,000 and 1,000,000 records (1 vendor, 1 customer, 10 applications, and a third each of
 * enrollments, consumers and installations); keyward beside a bare Bun.serve answering its bytes
 * and the steps between (bench/ladder-server.ts), json-server 0.17.4 on the same records, and
 * pgbench's one-row insert on the local PostgreSQL.
 *
 * Database mode (`--store postgres`; writes docs/benchmarks-postgres.md): data sets of 1,000 and
 * 1,000,000 enrollments (each with its own consumer and installation) in databases on the local
 * PostgreSQL, keyward beside pgbench on the same database, and two keyward instances side by side.
 *
 * Phases (`--phase`, see bench/support/settings.ts): read, page, snapshot, create, insert,
 * instances. Within a phase the sides are measured in turn, the order reversed every other round,
 * so that the noise of a shared machine hits all alike; every run reports the server's CPU time
 * per request beside its rate. Data sets are built once through the storage interface and kept in
 * bench/.cache (bench/support/dataset.ts); servers run on fresh copies. Every child process, temp
 * dir and working database is removed at the end, also on failure and Ctrl-C.
 *
 *   ./node_modules/.bin/bun run bench/run.ts [--quick] [--store embedded|postgres] [--phase ...]
 *
 * Needs wrk; node (json-server) for the embedded store; pgbench and a PostgreSQL server for
 * database mode and the insert phase.
 */
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { cachedDataSet, ENVIRONMENT } from '../support/dataset'
import { tokenIdOf } from '../../src/auth/tokens'
import { benchServeOptions, issueToken, initStore, startKeyward, type Target } from '../support/keyward'
import { ROOT } from '../../test/support/server-process'
import { Children, ProcessLog, firstLine, freePort, normaliseResponse, onInterrupt, parseResponse, rawGet, running, waitReady } from '../support/servers'
import { busyBeforeStart, mib, procStatus } from '../support/system'
import { findWrk, WRK_THREADS, wrkMissing } from '../support/wrk'
import { watchSnapshots, type SnapshotActivity } from '../support/snapshots'
import { copyDirDurably, syncAll } from '../support/files'
import { dropJsonServerFiles, ensureJsonServer, startJsonServer } from '../support/json-server'
import {
  createDatabase,
  databaseUrl,
  dropDatabase,
  durabilitySettings,
  findPgbench,
  onDatabase,
  PGBENCH_MISSING,
  reachable,
  serverVersion,
} from '../support/postgres'
import { livePids, measuredRun, measureRun, pgbenchLoad, settle, spreadLoad, wrkLoad, describeRun, type Load } from '../support/measure'
import {
  CREATE_CLIENTS,
  customersOf,
  EMPTY_CUSTOMERS,
  FIXED_RECORDS,
  INSERT_CLIENTS,
  LADDER,
  NO_WARMUP_ABOVE_MS,
  Outcomes,
  PAGE_CLIENTS,
  PAGE_SIZE,
  parseSettings,
  quietTimeoutMs,
  READ_CLIENTS,
  sizeLabel,
  slowRunCapSeconds,
  SNAPSHOT_CLIENTS,
  SNAPSHOT_LEAD_SECONDS,
  SNAPSHOT_TIMEOUT_SECONDS,
  snapshotBaselineSeconds,
  START_TIMEOUT_MS,
  USAGE,
  WRK_TIMEOUT_SECONDS,
  type DataSet,
  type Kind,
  type LadderKind,
  type Measure,
  type PhaseName,
  type Server,
  type Settings,
  type SnapshotPhase,
} from '../support/settings'
import { chart, report, type Environment } from '../support/report'

let settings: Settings
// As every benchmark of the driver answers it (bench/support/options.ts).
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(USAGE)
  process.exit(0)
}
try {
  settings = parseSettings(process.argv.slice(2))
} catch (error) {
  console.error(`bench/run.ts: ${(error as Error).message}\n\n${USAGE}`)
  process.exit(2)
}

const GET_SCRIPT = join(import.meta.dir, '..', 'run-get.lua')
const CREATE_SCRIPT = join(import.meta.dir, '..', 'run-create.lua')
const DOCS = join(ROOT, 'docs')

const children = new Children()
const outcomes = new Outcomes()
let workDir: string | undefined
/** Databases this run made (working copies, pgbench's): dropped at the end. */
const databases: string[] = []
/** Set on Ctrl-C: whatever is still running stops quietly while the cleanup runs. */
let interrupted = false

interface Tools {
  readonly wrk: string
  readonly pgbench: string | null
}

/** What every phase works with. */
interface Bench {
  readonly tools: Tools
  readonly work: string
  readonly sets: DataSet[]
  readonly servers: Server[]
  readonly keyward: (size: number) => Server
  /** The keyward of `--baseline DIR` on the same set, if asked for. */
  readonly baseline: (size: number) => Server | null
  readonly jsonServer: (size: number) => Server | null
  /** The bare server and the ladder's steps (embedded store, read phase). */
  readonly bare: Server | null
  readonly ladder: Server[]
}

const smallest = () => settings.sizes[0]!
const largest = () => settings.sizes.at(-1)!
const needsJsonServer = () => settings.store === 'embedded' && settings.phases.some((p) => p === 'read' || p === 'page' || p === 'create')
const needsDatabase = () => settings.store === 'postgres' || settings.phases.includes('insert')

// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const wrk = findWrk()
  if (!wrk) {
    console.error(wrkMissing('bench/run.ts'))
    return 1
  }
  if (needsJsonServer() && !Bun.which('node')) {
    console.error('bench/run.ts needs node (json-server runs on it); install Node.js 18 or later.')
    return 1
  }
  const pgbench = needsDatabase() ? findPgbench() : null
  if (needsDatabase()) {
    if (!pgbench) {
      console.error(`bench/run.ts: ${PGBENCH_MISSING}`)
      return 1
    }
    const problem = await reachable(settings.adminUrl)
    if (problem) {
      console.error(`bench/run.ts needs a PostgreSQL server (--database-url, default the postgres user on 127.0.0.1:5432): ${problem}`)
      return 1
    }
  }
  workDir = await mkdtemp(join(tmpdir(), 'keyward-bench-'))
  try {
    return await run({ wrk, pgbench }, workDir)
  } finally {
    await cleanup()
  }
}

async function cleanup(): Promise<void> {
  // SIGKILL: the data is a throw-away copy, and a graceful stop would first write a snapshot of up
  // to a million records, for nothing. Profiled servers stop gracefully: the profile is written at exit.
  await children.stopAll(settings.profileDir ? { signal: 'SIGTERM', graceMs: 60_000 } : { signal: 'SIGKILL' })
  for (const name of databases.splice(0)) await dropWorkingDatabase(name)
  if (workDir) await rm(workDir, { recursive: true, force: true })
}

/** Drops a database this run made; tries again for a while if the server is restarting. */
async function dropWorkingDatabase(name: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await dropDatabase(settings.adminUrl, name)
    } catch (error) {
      if (attempt >= 10) return console.error(`could not drop database ${name}, drop it by hand: ${(error as Error).message}`)
      await Bun.sleep(1000)
    }
  }
}

async function run(tools: Tools, work: string): Promise<number> {
  const started = performance.now()
  const elapsed = () => `${((performance.now() - started) / 1000).toFixed(0)} s`
  const serve = await benchServeOptions(ROOT, settings.rateLimit)
  console.log(
    `keyward benchmark, ${settings.store} store (${settings.quick ? 'quick' : 'full'}: ${settings.sizes.map(sizeLabel).join(' / ')} ` +
      `${settings.store === 'embedded' ? 'records' : 'enrollments'}; phases ${settings.phases.join(', ')}; ${settings.rounds} round${settings.rounds > 1 ? 's' : ''}, ` +
      `${settings.warmupSeconds}s warm-up + ${settings.runSeconds}s per run; wrk -t${WRK_THREADS}; ${serve.note}; temp files in ${work})`,
  )
  if (needsJsonServer()) await ensureJsonServer(children)
  const busy = await busyBeforeStart()
  if (busy) console.log(`CPU busy before start (other processes): ${busy} of all cores`)

  // 1. Data sets: from the cache, built once.
  const sets: DataSet[] = []
  for (const size of settings.sizes) sets.push(await prepareSet(size, work))
  console.log(`data sets ready (${elapsed()})`)

  // 2. Servers, one at a time from the largest, so that start-up times are not disturbed.
  const servers: Server[] = []
  for (const set of [...sets].reverse()) {
    const keyward = newServer('keyward', set)
    await startServer(keyward, work)
    servers.push(keyward)
    await settle(livePids(servers.map((s) => s.proc)), `after starting ${keyward.name}`, quietTimeoutMs(settings) * 4)
    if (settings.baseline) {
      const baseline = newServer('baseline', set)
      await startServer(baseline, work)
      servers.push(baseline)
      await settle(livePids(servers.map((s) => s.proc)), `after starting ${baseline.name}`, quietTimeoutMs(settings) * 4)
    }
    if (needsJsonServer()) {
      const jsonServer = newServer('json-server', set)
      await startServer(jsonServer, work)
      servers.push(jsonServer)
      await settle(livePids(servers.map((s) => s.proc)), `after starting ${jsonServer.name}`, quietTimeoutMs(settings) * 4)
    }
  }
  const keywardOf = (size: number) => servers.find((s) => s.kind === 'keyward' && s.set!.size === size)!
  const baselineOf = (size: number) => servers.find((s) => s.kind === 'baseline' && s.set!.size === size) ?? null
  const jsonServerOf = (size: number) => servers.find((s) => s.kind === 'json-server' && s.set!.size === size) ?? null

  // The limit and the ladder: a bare Bun.serve with keyward's own answer to the read, and the steps between.
  let bare: Server | null = null
  const ladder: Server[] = []
  if (settings.store === 'embedded' && settings.phases.includes('read')) {
    const responseFile = await cannedRead(keywardOf(smallest()), work)
    bare = await startLadderStep('bare', responseFile, keywardOf(smallest()))
    for (const kind of Object.keys(LADDER) as LadderKind[]) ladder.push(await startLadderStep(kind, responseFile, keywardOf(smallest())))
    servers.push(bare, ...ladder)
  }

  // 3. Check every server answers right before measuring anything.
  for (const s of servers) {
    if (s.kind === 'keyward' || s.kind === 'baseline') await checkKeyward(s)
    if (s.kind === 'json-server') await checkJsonServer(s)
  }
  // json-server's check wrote its whole db.json, without fsync: out of the page cache before measuring.
  const synced = await syncAll()
  await settle(livePids(servers.map((s) => s.proc)), 'after the checks', quietTimeoutMs(settings) * 4)
  console.log(`servers ready and checked (${elapsed()}; sync took ${synced.toFixed(1)} s)\n`)

  // 4. Measure, phase by phase.
  const context: Bench = { tools, work, sets, servers, keyward: keywardOf, baseline: baselineOf, jsonServer: jsonServerOf, bare, ladder }
  benchContext = context
  let snapshot: SnapshotPhase | null = null
  for (const phase of settings.phases) {
    if (interrupted) break
    console.log(`${phase} · at ${elapsed()}`)
    if (phase === 'snapshot') snapshot = await snapshotPhase(context)
    else await PHASES[phase](context)
  }

  for (const s of servers) if (running(s.proc)) s.memory = { rss: await procStatus(s.proc.pid, 'VmRSS'), hwm: await procStatus(s.proc.pid, 'VmHWM') }

  // 5. Report.
  const environment: Environment = {
    busy,
    wallSeconds: (performance.now() - started) / 1000,
    serveNote: serve.note,
    bareBytes,
    bareBodyBytes,
    postgres: needsDatabase() ? `${await serverVersion(settings.adminUrl)} (${await durabilitySettings(settings.adminUrl)})` : null,
  }
  const { markdown, failed } = report(settings, { sets, servers, outcomes, snapshot, environment })
  console.log('\n' + markdown)
  if (settings.complete) {
    await mkdir(DOCS, { recursive: true })
    const name = settings.store === 'embedded' ? 'benchmarks' : 'benchmarks-postgres'
    await writeFile(join(DOCS, `${name}.md`), markdown)
    if (settings.store === 'embedded') await writeFile(join(DOCS, 'benchmarks.svg'), chart(settings, sets, outcomes))
    console.log(`written to docs/${name}.md (${elapsed()} in all)`)
  } else {
    console.log(`only some phases ran: the report is not written to docs/ (${elapsed()} in all)`)
  }
  return failed ? 1 : 0
}

// ---------------------------------------------------------------------------------------------
// Data sets

async function prepareSet(size: number, work: string): Promise<DataSet> {
  const label = sizeLabel(size)
  const unit = settings.store === 'embedded' ? 'records' : 'enrollments'
  const spec = {
    store: settings.store,
    name: `${unit}_${label.toLowerCase()}`,
    customers: customersOf(settings.store, size),
    emptyCustomers: EMPTY_CUSTOMERS[settings.store],
    jsonServer: settings.store === 'embedded',
    adminUrl: settings.adminUrl,
  }
  const began = performance.now()
  const cached = await cachedDataSet(spec, { rebuild: settings.rebuild, spawn: (cmd, options) => children.spawn(cmd, options) })
  console.log(
    `  ${label} ${unit}: ${cached.built ? `built through the storage interface in ${((performance.now() - began) / 1000).toFixed(0)} s` : 'from bench/.cache'} ` +
      `(${cached.meta.records.toLocaleString('en')} records)`,
  )
  let working: Target
  let database: string | null = null
  if (cached.pristine.store === 'embedded') {
    working = { store: 'embedded', dir: join(work, `keyward-${label}`) }
  } else {
    database = `keyward_bench_run_${label.toLowerCase()}_${process.pid}`
    databases.push(database)
    await dropDatabase(settings.adminUrl, database)
    await createDatabase(settings.adminUrl, database, cached.database!)
    working = { store: 'postgres', url: databaseUrl(settings.adminUrl, database) }
  }
  // Tokens from the CLI: on the pristine data dir (every copy then holds whatever the token needs), or the working database.
  const tokenTarget = cached.pristine.store === 'embedded' ? cached.pristine : working
  const customer = cached.meta.customers[0]!
  const appsFile = join(work, `apps-${label}.txt`)
  await writeFile(appsFile, customer.applicationIds.join('\n') + '\n')
  return {
    size,
    label,
    meta: cached.meta,
    pristine: cached.pristine,
    working,
    database,
    pristineDb: cached.jsonServerDb,
    customerId: customer.organizationId,
    applicationIds: customer.applicationIds,
    readId: customer.middleEnrollmentId!,
    pageApp: customer.applicationIds[0]!,
    appsFile,
    token: await issueToken(tokenTarget, customer.organizationId),
    vendorToken: await issueToken(tokenTarget, cached.meta.vendorId),
  }
}

// ---------------------------------------------------------------------------------------------
// Servers

function newServer(kind: Kind, set: DataSet | null): Server {
  return {
    kind,
    name: set ? `${kind} ${set.label}` : kind,
    set,
    port: 0,
    proc: null,
    log: null,
    startupSeconds: null,
    startups: [],
    rssAtReady: null,
    failure: null,
    dirty: false,
    restarts: 0,
    checkCreateSeconds: 0,
    checkReadMs: 0,
    checkPageMs: 0,
    memory: null,
  }
}

/** keyward or json-server on a fresh copy of its set's data; json-server failing to start is a measurement, not an error. */
async function startServer(s: Server, work: string): Promise<void> {
  const set = s.set!
  try {
    let started: { proc: Server['proc']; port: number; log: ProcessLog; startupSeconds: number; startupCpuSeconds?: number }
    if (s.kind === 'keyward' || s.kind === 'baseline') {
      const working = workingTarget(s)
      if (working.store === 'embedded' && set.pristine.store === 'embedded') {
        await rm(working.dir, { recursive: true, force: true })
        await copyDirDurably(set.pristine.dir, working.dir)
      }
      started = await startKeyward(children, working, {
        name: s.name,
        timeoutMs: START_TIMEOUT_MS,
        rateLimit: settings.rateLimit,
        ...(s.kind === 'baseline' ? { root: settings.baseline! } : {}),
        ...(settings.profileDir ? { profileDir: settings.profileDir } : {}),
      })
    } else {
      started = await startJsonServer(children, {
        name: s.name,
        pristineDb: set.pristineDb!,
        db: jsonServerDb(set, work),
        workDir: work,
        // "Until it answers": a read of one record (the vendor, first of a two-record collection).
        probePath: `/organizations/${set.meta.vendorId}`,
        timeoutMs: START_TIMEOUT_MS,
      })
    }
    Object.assign(s, { proc: started.proc, port: started.port, log: started.log, failure: null, dirty: false })
    const rss = await procStatus(started.proc!.pid, 'VmRSS')
    s.startups.push({ seconds: started.startupSeconds, cpuSeconds: started.startupCpuSeconds ?? null })
    if (s.startupSeconds === null) {
      s.startupSeconds = started.startupSeconds
      s.rssAtReady = rss
    }
    const cpu = started.startupCpuSeconds !== undefined ? `, ${started.startupCpuSeconds.toFixed(2)} s of CPU` : ''
    console.log(`  ${s.name.padEnd(16)} answers after ${started.startupSeconds.toFixed(2)} s${cpu}, VmRSS ${mib(rss)} MiB${s.restarts > 0 ? ` (restart ${s.restarts})` : ''}`)
  } catch (error) {
    if (s.kind === 'keyward' || s.kind === 'baseline') throw error
    s.failure = `did not start: ${firstLine((error as Error).message)}`
    s.dirty = false // no second try: a start can take up to START_TIMEOUT_MS
    console.log(`  ${s.name.padEnd(16)} ${s.failure}`)
    await kill(s)
  }
}

/** Where a keyward server's data is: the set's working copy, or a copy of its own for the baseline (embedded only). */
const workingTarget = (s: Server): Target =>
  s.kind === 'baseline' && s.set!.working.store === 'embedded' ? { store: 'embedded', dir: `${s.set!.working.dir}-baseline` } : s.set!.working

const jsonServerDb = (set: DataSet, work: string) => join(work, `json-server-${set.label}.json`)

/** Stops a server now (SIGKILL: its data is a throw-away copy), noting its memory first. */
async function kill(s: Server): Promise<void> {
  if (!s.proc) return
  if (running(s.proc)) s.memory = { rss: await procStatus(s.proc.pid, 'VmRSS'), hwm: await procStatus(s.proc.pid, 'VmHWM') }
  await children.stop(s.proc, { signal: 'SIGKILL' })
}

/** Starts a server again on a fresh copy of its pristine data. */
async function restart(s: Server, work: string): Promise<void> {
  await kill(s)
  s.restarts++
  await startServer(s, work)
}

let bareBytes = 0
let bareBodyBytes = 0

/** keyward's answer to the read by id (of the smallest set), as the bare server will repeat it. */
async function cannedRead(keyward: Server, work: string): Promise<string> {
  const set = keyward.set!
  const path = `/api/enrollments/${set.readId}`
  const answer = await rawGet(keyward.port, path, `Bearer ${set.token}`)
  const canned = parseResponse(answer)
  if (canned.status !== 200) throw new Error(`${keyward.name}: GET ${path} answered ${canned.status}:\n${answer}`)
  const file = join(work, 'read-response.json')
  await writeFile(file, JSON.stringify(canned))
  bareBytes = Buffer.byteLength(answer)
  bareBodyBytes = Buffer.byteLength(canned.body)
  return file
}

/** A step of the ladder (the bare server first), checked to answer keyward's bytes but for the trace id. */
async function startLadderStep(kind: 'bare' | LadderKind, responseFile: string, keyward: Server): Promise<Server> {
  const s = newServer(kind, null)
  s.port = await freePort()
  const variant = kind === 'bare' ? 'bare' : kind === 'elysia' ? 'elysia' : 'header'
  s.proc = children.spawn([process.execPath, 'run', 'bench/ladder-server.ts', '--variant', variant, '--port', String(s.port), '--response', responseFile], {
    cwd: ROOT,
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: 'pipe',
  })
  s.log = new ProcessLog(s.proc.stderr)
  const set = keyward.set!
  const path = `/api/enrollments/${set.readId}`
  // Any answer means it listens (this one has no Authorization header: an error for the steps).
  await waitReady(s.name, s.proc, `http://127.0.0.1:${s.port}${path}`, { log: () => s.log!.text(), accept: () => true })
  s.rssAtReady = await procStatus(s.proc.pid, 'VmRSS')
  const auth = `Bearer ${set.token}`
  const [answer, keywardAnswer] = [await rawGet(s.port, path, auth), await rawGet(keyward.port, path, auth)]
  // The trace id must be a new one (not keyward's) for the steps that make one.
  const fresh = [...new Set(answer.match(/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? [])].filter((id) => !keywardAnswer.includes(id))
  if (normaliseResponse(answer) !== normaliseResponse(keywardAnswer) || (kind !== 'bare' && fresh.length !== 1)) {
    throw new Error(`${s.name}'s answer differs from keyward's:\n--- keyward\n${keywardAnswer}\n--- ${s.name}\n${answer}`)
  }
  if (kind === 'bare') console.log(`  bare Bun.serve     answers keyward's bytes: ${bareBytes} bytes each, body ${bareBodyBytes} bytes (Date and trace id aside)`)
  return s
}

/** One read, one page, one create through fetch: right status, right content. */
async function checkKeyward(s: Server): Promise<void> {
  const set = s.set!
  const base = `http://127.0.0.1:${s.port}`
  const headers = { authorization: `Bearer ${set.token}` }
  let begun = performance.now()
  const read = await fetch(`${base}/api/enrollments/${set.readId}`, { headers })
  const readBody = (await read.json()) as { enrollment?: { enrollment_id: string } }
  s.checkReadMs = performance.now() - begun
  if (read.status !== 200 || readBody.enrollment?.enrollment_id !== set.readId) {
    throw new Error(`${s.name}: GET /api/enrollments/${set.readId} answered ${read.status}: ${JSON.stringify(readBody).slice(0, 300)}`)
  }
  begun = performance.now()
  const page = await fetch(`${base}/api/enrollments?application_ids=${set.pageApp}&page=1&page_size=${PAGE_SIZE}`, { headers })
  const pageBody = (await page.json()) as { enrollments?: { application_id: string }[]; total?: number }
  s.checkPageMs = performance.now() - begun
  const items = pageBody.enrollments ?? []
  // At least the application's share of the data set: create runs add to it.
  const expected = Math.ceil(set.meta.customers[0]!.enrollments / set.applicationIds.length)
  if (page.status !== 200 || items.length !== PAGE_SIZE || (pageBody.total ?? 0) < expected || items.some((e) => e.application_id !== set.pageApp)) {
    throw new Error(`${s.name}: the filtered page answered ${page.status} with ${items.length} items of ${pageBody.total} (expected ${PAGE_SIZE} of ${expected})`)
  }
  begun = performance.now()
  const created = await fetch(`${base}/api/enrollments`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(createBody(set, false)),
  })
  s.checkCreateSeconds = (performance.now() - begun) / 1000
  if (created.status !== 201) throw new Error(`${s.name}: POST /api/enrollments answered ${created.status}: ${await created.text()}`)
  const customer = await fetch(`${base}/api/organizations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${set.vendorToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ description: 'check', parent_id: set.meta.vendorId }),
  })
  if (customer.status !== 201) throw new Error(`${s.name}: POST /api/organizations answered ${customer.status}: ${await customer.text()}`)
  console.log(`  ${s.name.padEnd(16)} checked: read 200, page ${items.length} of ${pageBody.total}, enrollment and organization create 201`)
}

async function checkJsonServer(s: Server): Promise<void> {
  if (s.failure) return
  const set = s.set!
  const base = `http://127.0.0.1:${s.port}`
  try {
    let begun = performance.now()
    const read = await fetch(`${base}/enrollments/${set.readId}`)
    const readBody = (await read.json()) as { id?: string }
    s.checkReadMs = performance.now() - begun
    if (read.status !== 200 || readBody.id !== set.readId) throw new Error(`GET /enrollments/${set.readId} answered ${read.status}`)
    begun = performance.now()
    const page = await fetch(`${base}/enrollments?application_id=${set.pageApp}&_page=1&_limit=${PAGE_SIZE}`)
    const items = (await page.json()) as { application_id: string }[]
    s.checkPageMs = performance.now() - begun
    const total = Number(page.headers.get('x-total-count'))
    if (page.status !== 200 || items.length !== PAGE_SIZE || total < 33 || items.some((e) => e.application_id !== set.pageApp)) {
      throw new Error(`the filtered page answered ${page.status} with ${items.length} items of ${total}`)
    }
    begun = performance.now()
    const created = await fetch(`${base}/enrollments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(createBody(set, true)),
      signal: AbortSignal.timeout(WRK_TIMEOUT_SECONDS * 1000),
    })
    s.checkCreateSeconds = (performance.now() - begun) / 1000
    if (created.status !== 201) throw new Error(`POST /enrollments answered ${created.status}: ${(await created.text()).slice(0, 300)}`)
    console.log(`  ${s.name.padEnd(16)} checked: read 200, page ${items.length} of ${total}, create 201 in ${(s.checkCreateSeconds * 1000).toFixed(0)} ms`)
  } catch (error) {
    s.failure = `answered wrongly: ${(error as Error).message}`
    console.log(`  ${s.name.padEnd(16)} ${s.failure}`)
    await kill(s)
  }
}

function createBody(set: DataSet, withId: boolean): Record<string, string> {
  const enrollmentId = crypto.randomUUID()
  return {
    ...(withId ? { id: enrollmentId } : {}),
    enrollment_id: enrollmentId,
    consumer_id: crypto.randomUUID(),
    installation_id: crypto.randomUUID(),
    application_id: set.applicationIds[1]!,
    environment: ENVIRONMENT,
    installation_description: 'check',
  }
}

/** Rows an embedded keyward holds now: its enrollments total, the consumer and installation of each, and the fixed rows. */
async function keywardRecords(s: Server): Promise<number | null> {
  try {
    const response = await fetch(`http://127.0.0.1:${s.port}/api/enrollments?page_size=1`, { headers: { authorization: `Bearer ${s.set!.token}` } })
    const body = (await response.json()) as { total?: number }
    return typeof body.total === 'number' ? FIXED_RECORDS + 3 * body.total : null
  } catch {
    return null
  }
}

// ---------------------------------------------------------------------------------------------
// Loads

/** wrk's environment: KEYWARD_TOKEN is the token the scripts send (none: none, whatever the caller's shell holds). */
const wrkOptions = (token?: string) => ({
  timeoutSeconds: WRK_TIMEOUT_SECONDS,
  env: { ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name !== 'KEYWARD_TOKEN')), ...(token ? { KEYWARD_TOKEN: token } : {}) },
  spawn: (cmd: string[], options: Parameters<typeof Bun.spawn>[1]) => children.spawn(cmd, options),
})
const nonce = () => 1 + Math.floor(Math.random() * 0x7ffffff0)

/**
 * GET `path` on server `s` from `clients` connections, as `token` (none: no Authorization header).
 * The port is read when the load starts: a restart moves the server to another.
 */
function getLoad(s: Server, path: string, clients: number, token: string | null) {
  return (seconds: number): Load =>
    wrkLoad(bench().tools.wrk, ['-d', `${seconds}s`, '-c', String(clients), '-s', GET_SCRIPT, `http://127.0.0.1:${s.port}${path}`], wrkOptions(token ?? undefined))
}

/** POST /api/enrollments (keyward) or /enrollments (json-server) with fresh ids; the warm-up from one connection. */
function createLoad(s: Server, clients: number) {
  const set = s.set!
  const path = s.kind === 'json-server' ? '/enrollments' : '/api/enrollments'
  const kind = s.kind === 'json-server' ? 'json-server' : 'keyward'
  return (seconds: number, warmup: boolean): Load =>
    wrkLoad(
      bench().tools.wrk,
      ['-d', `${seconds}s`, '-c', String(warmup ? 1 : clients), '-s', CREATE_SCRIPT, `http://127.0.0.1:${s.port}${path}`, '--', kind, set.appsFile, String(nonce()), ENVIRONMENT],
      wrkOptions(set.token),
    )
}

/** POST /api/organizations (one new customer of the vendor) from `clients` connections to server `s`. */
function organizationLoad(s: Server, clients: number) {
  const set = s.set!
  return (seconds: number): Load =>
    wrkLoad(
      bench().tools.wrk,
      ['-d', `${seconds}s`, '-c', String(clients), '-s', CREATE_SCRIPT, `http://127.0.0.1:${s.port}/api/organizations`, '--', 'organization', set.meta.vendorId],
      wrkOptions(set.vendorToken),
    )
}

/** The benchmark's state once its servers run (the loads and measurements read the tools and work dir from it). */
let benchContext: Bench | undefined
const bench = () => benchContext!

// ---------------------------------------------------------------------------------------------
// Measuring

/** The order of a round: reversed every other round. */
const order = <T>(items: T[], round: number) => (round % 2 === 0 ? [...items].reverse() : items)

/**
 * One run of `measure` on server `s` (restarted first if a create run left it bigger) into the
 * outcome of (measure, kind, size).
 */
async function measureServer(
  s: Server,
  measure: Measure,
  round: number,
  load: (seconds: number, warmup: boolean) => Load,
  options: { warmup?: number; seconds?: number; creates?: boolean; kind?: Kind; size?: number; serverPids?: () => number[] } = {},
): Promise<void> {
  if (interrupted) return
  const b = bench()
  const outcome = outcomes.of(measure, options.kind ?? s.kind, options.size ?? s.set!.size)
  if (s.kind === 'keyward') await focusOn(b, s.set!)
  if (s.dirty) {
    try {
      await restart(s, b.work)
    } catch (error) {
      s.failure = `did not restart: ${firstLine((error as Error).message)}`
    }
  }
  if (s.failure || !running(s.proc)) {
    outcome.failures.push(s.failure ?? 'not running')
    console.log(`  ${measure} ${s.name} r${round}: not measured: ${s.failure ?? 'not running'}`)
    return
  }
  const embeddedKeyward = (s.kind === 'keyward' || s.kind === 'baseline') && s.set?.working.store === 'embedded'
  await measureRun({
    label: `${measure} ${s.name}${options.kind && options.kind !== s.kind ? ` (${options.kind})` : ''} r${round}`,
    outcome,
    load,
    warmupSeconds: options.warmup ?? settings.warmupSeconds,
    seconds: options.seconds ?? settings.runSeconds,
    accounting: () => ({
      serverPids: options.serverPids ? options.serverPids() : [s.proc!.pid],
      ourPids: livePids(b.servers.map((x) => x.proc)),
      database: s.set?.database ? { adminUrl: settings.adminUrl, names: [s.set.database] } : null,
    }),
    dataDir: embeddedKeyward ? (workingTarget(s) as { dir: string }).dir : null,
    ...(embeddedKeyward && (measure === 'create1' || measure === 'create64') ? { records: () => keywardRecords(s) } : {}),
    settle: (when) => settle(livePids(b.servers.map((x) => x.proc)), when, quietTimeoutMs(settings)),
  })
  const last = outcome.runs.at(-1)
  if (last && last.non2xx > 0) console.log(`    (answers ≥ 400; the server's log ends: ${JSON.stringify(s.log?.text().trim().split('\n').slice(-3).join(' | ').slice(-600) ?? '')})`)
  if (options.creates && s.set?.working.store === 'embedded') {
    // The data grew: the next run starts again from the pristine data.
    s.dirty = true
    if (s.kind === 'json-server') {
      // It still has the writes wrk gave up on queued (seconds each at the large sizes): stop it now.
      await kill(s)
      await dropJsonServerFiles(jsonServerDb(s.set, b.work), b.work)
    }
  }
  const exit = s.proc ? (s.proc.exitCode ?? s.proc.signalCode) : null
  if (exit !== null && !s.dirty) s.failure = `exited (${exit}): ${firstLine(s.log?.text().slice(-600) ?? '')}`
}

/**
 * One pgbench run of `script` on the set's working database (or `url`) into the outcome of
 * (measure, kind, size): `pgbench` the database's limit, `pgbench: keyward` the statements keyward
 * sends for the same request.
 */
async function measurePgbench(
  set: DataSet,
  measure: Measure,
  round: number,
  run: { script: string; clients: number; define: Record<string, string>; url?: string; kind?: Kind },
): Promise<void> {
  if (interrupted) return
  const b = bench()
  const { script, clients, define } = run
  const target = run.url ?? (set.working as { url: string }).url
  const kind = run.kind ?? 'pgbench'
  await focusOn(b, set)
  await measureRun({
    label: `${measure} ${kind} ${set.label} r${round}`,
    outcome: outcomes.of(measure, kind, set.size),
    load: (seconds) =>
      pgbenchLoad(b.tools.pgbench!, target, { script, clients, seconds, define, spawn: (cmd, options) => children.spawn(cmd, options) }),
    // At least 2 s: opening 64 connections can take a second on a busy machine.
    warmupSeconds: Math.max(2, settings.warmupSeconds),
    seconds: settings.runSeconds,
    accounting: () => ({ serverPids: [], ourPids: livePids(b.servers.map((x) => x.proc)), database: { adminUrl: settings.adminUrl, names: [new URL(target).pathname.slice(1)] } }),
    settle: (when) => settle(livePids(b.servers.map((x) => x.proc)), when, quietTimeoutMs(settings)),
  })
}

/** pgbench's scripts (bench/pgbench/): the database's limit, and keyward's own statements. */
const PGBENCH = {
  read: join(import.meta.dir, '..', 'pgbench', 'read.sql'),
  readAsKeyward: join(import.meta.dir, '..', 'pgbench', 'read-as-keyward.sql'),
  insert: join(import.meta.dir, '..', 'pgbench', 'insert.sql'),
  insertAsKeyward: join(import.meta.dir, '..', 'pgbench', 'insert-as-keyward.sql'),
}

// ---------------------------------------------------------------------------------------------
// Phases

const PHASES: Record<Exclude<PhaseName, 'snapshot'>, (b: Bench) => Promise<void>> = {
  async read(b) {
    // keyward's read also reads the enrollment's application, within the caller's scope (bench/pgbench/read-as-keyward.sql).
    const enrollmentOf = new Map<number, { app: string; owner: string }>()
    if (settings.store === 'postgres') {
      for (const set of b.sets) {
        const rows = await onDatabase((set.working as { url: string }).url, (sql) => sql`SELECT application_id, organization_id FROM enrollments WHERE enrollment_id = ${set.readId}`)
        enrollmentOf.set(set.size, { app: rows[0].application_id as string, owner: rows[0].organization_id as string })
      }
    }
    for (let round = 1; round <= settings.rounds; round++) {
      for (const size of order([...settings.sizes], round)) {
        const set = b.sets.find((s) => s.size === size)!
        const keyward = b.keyward(size)
        const path = `/api/enrollments/${set.readId}`
        const sides: (() => Promise<void>)[] = [() => measureServer(keyward, 'read', round, getLoad(keyward, path, READ_CLIENTS, set.token), { warmup: warmupFor(keyward.checkReadMs) })]
        const baseline = b.baseline(size)
        if (baseline) sides.push(() => measureServer(baseline, 'read', round, getLoad(baseline, path, READ_CLIENTS, set.token), { warmup: warmupFor(baseline.checkReadMs) }))
        if (settings.store === 'embedded') {
          // The bare server and the steps do not depend on the data: the ladder beside the smallest set, the limit beside each.
          for (const step of [b.bare!, ...(size === smallest() ? b.ladder : [])]) {
            sides.push(() => measureServer(step, 'read', round, getLoad(step, path, READ_CLIENTS, set.token), { size }))
          }
          const jsonServer = b.jsonServer(size)
          if (jsonServer) {
            sides.push(() => measureServer(jsonServer, 'read', round, getLoad(jsonServer, `/enrollments/${set.readId}`, READ_CLIENTS, null), { warmup: warmupFor(jsonServer.checkReadMs) }))
          }
        } else {
          const define = { id: set.readId, token: tokenIdOf(set.token)!, ...enrollmentOf.get(size)! }
          sides.push(() => measurePgbench(set, 'read', round, { script: PGBENCH.read, clients: READ_CLIENTS, define }))
          sides.push(() => measurePgbench(set, 'read', round, { script: PGBENCH.readAsKeyward, clients: READ_CLIENTS, define, kind: 'pgbench: keyward' }))
        }
        for (const side of order(sides, round)) await side()
      }
    }
  },

  async page(b) {
    for (let round = 1; round <= settings.rounds; round++) {
      for (const size of order([...settings.sizes], round)) {
        const set = b.sets.find((s) => s.size === size)!
        const keyward = b.keyward(size)
        const jsonServer = b.jsonServer(size)
        const sides: (() => Promise<void>)[] = [
          () =>
            measureServer(keyward, 'page', round, getLoad(keyward, `/api/enrollments?application_ids=${set.pageApp}&page=1&page_size=${PAGE_SIZE}`, PAGE_CLIENTS, set.token), {
              warmup: warmupFor(keyward.checkPageMs),
            }),
        ]
        if (jsonServer) {
          sides.push(() =>
            measureServer(jsonServer, 'page', round, getLoad(jsonServer, `/enrollments?application_id=${set.pageApp}&_page=1&_limit=${PAGE_SIZE}`, PAGE_CLIENTS, null), {
              warmup: warmupFor(jsonServer.checkPageMs),
            }),
          )
        }
        for (const side of order(sides, round)) await side()
      }
    }
  },

  async create(b) {
    for (const clients of CREATE_CLIENTS) {
      const measure: Measure = clients === 1 ? 'create1' : 'create64'
      console.log(`  (${clients} connection${clients > 1 ? 's' : ''})`)
      for (let round = 1; round <= settings.rounds; round++) {
        for (const size of order([...settings.sizes], round)) {
          const sides = [b.keyward(size), b.baseline(size), b.jsonServer(size)].filter((s): s is Server => s !== null)
          for (const s of order(sides, round)) {
            // json-server: no warm-up (every warm-up write would have to be undone by a restart;
            // its reads warmed it up); at the large sizes runs long enough to see a few writes.
            const jsonServer = s.kind === 'json-server'
            const seconds = jsonServer ? Math.max(settings.runSeconds, Math.min(slowRunCapSeconds(settings), Math.ceil(3 * s.checkCreateSeconds))) : settings.runSeconds
            await measureServer(s, measure, round, createLoad(s, clients), { warmup: jsonServer ? 0 : settings.warmupSeconds, seconds, creates: true })
          }
        }
      }
    }
  },

  async insert(b) {
    // keyward creating customers (one row each) beside pgbench inserting one row into a table
    // shaped like keyward's organizations: in the same database in database mode, in a database
    // of its own (with keyward's schema, made by `keyward init`) for the embedded store.
    const set = b.sets.find((s) => s.size === (settings.store === 'embedded' ? smallest() : largest()))!
    const keyward = b.keyward(set.size)
    await focusOn(b, set)
    let url: string
    if (set.working.store === 'postgres') {
      url = set.working.url
    } else {
      const name = `keyward_bench_pgbench_${process.pid}`
      databases.push(name)
      await dropDatabase(settings.adminUrl, name)
      await createDatabase(settings.adminUrl, name)
      url = databaseUrl(settings.adminUrl, name)
      await initStore({ store: 'postgres', url })
    }
    await onDatabase(url, (sql) => sql.unsafe('DROP TABLE IF EXISTS bench_organizations; CREATE TABLE bench_organizations (LIKE organizations INCLUDING ALL)'))
    try {
      for (let round = 1; round <= settings.rounds; round++) {
        const define = { parent: set.meta.vendorId, token: tokenIdOf(set.vendorToken)! }
        const sides = [
          () => measureServer(keyward, 'insert64', round, organizationLoad(keyward, INSERT_CLIENTS), { creates: true }),
          () => measurePgbench(set, 'insert64', round, { script: PGBENCH.insert, clients: INSERT_CLIENTS, define, url }),
        ]
        if (set.working.store === 'postgres') {
          sides.push(() => measurePgbench(set, 'insert64', round, { script: PGBENCH.insertAsKeyward, clients: INSERT_CLIENTS, define, kind: 'pgbench: keyward' }))
        }
        for (const side of order(sides, round)) await side()
      }
    } finally {
      if (set.working.store === 'postgres') await onDatabase(url, (sql) => sql`DROP TABLE IF EXISTS bench_organizations`)
    }
  },

  async instances(b) {
    // Two `serve` processes on one database, the load spread over both (a wrk each), against one
    // instance under the same two wrk processes: the same load generators on both sides.
    const set = b.sets.find((s) => s.size === largest())!
    const first = b.keyward(set.size)
    await focusOn(b, set)
    const second = newServer('keyward', set)
    await startServer(second, b.work)
    b.servers.push(second)
    try {
      await checkKeyward(second)
      const half = READ_CLIENTS / 2
      const path = `/api/enrollments/${set.readId}`
      const reads = (targets: Server[]) => (seconds: number) => spreadLoad(targets.map((s) => getLoad(s, path, half, set.token)(seconds)))
      const inserts = (targets: Server[]) => (seconds: number) => spreadLoad(targets.map((s) => organizationLoad(s, INSERT_CLIENTS / 2)(seconds)))
      for (const [measure, load] of [['instances-read', reads], ['instances-insert64', inserts]] as const) {
        for (let round = 1; round <= settings.rounds; round++) {
          const sides = [
            () => measureServer(first, measure, round, load([first, first]), { kind: 'keyward' }),
            () => measureServer(first, measure, round, load([first, second]), { kind: 'keyward×2', serverPids: () => livePids([first.proc, second.proc]) }),
          ]
          for (const side of order(sides, round)) await side()
        }
      }
    } finally {
      await kill(second)
      b.servers.splice(b.servers.indexOf(second), 1)
    }
  },
}

/**
 * Database mode: only the keyward server of the data set being measured runs; the others are
 * stopped and started again when their turn comes. Each keeps up to 16 connections open, and
 * pgbench's 64 clients beside several of them would pass the server's max_connections (100 by
 * default; other users of the machine use some too).
 */
async function focusOn(b: Bench, set: DataSet): Promise<void> {
  if (settings.store !== 'postgres') return
  for (const s of b.servers) if (s.kind === 'keyward' && s.set !== set && running(s.proc)) await kill(s)
  const own = b.keyward(set.size)
  if (running(own.proc) || own.failure) return
  try {
    await restart(own, b.work)
  } catch (error) {
    // Its runs are reported as not measured; the others go on.
    own.failure = `did not start again: ${firstLine((error as Error).message)}`
  }
}

/** No warm-up for a request that took long in the checks: its cost is the work, not a cold JIT (and a warm-up would leave a queue). */
const warmupFor = (checkMs: number) => (checkMs > NO_WARMUP_ABOVE_MS ? 0 : settings.warmupSeconds)

/**
 * Reads (GET by id, SNAPSHOT_CLIENTS connections) while the embedded store writes a snapshot of
 * the largest set: first a baseline run without one, then a run that starts SNAPSHOT_LEAD_SECONDS
 * before SIGUSR1 and is stopped SNAPSHOT_LEAD_SECONDS after the new snapshot.json is in place, so
 * it covers the whole write.
 */
async function snapshotPhase(b: Bench): Promise<SnapshotPhase> {
  const s = b.keyward(largest())
  const set = s.set!
  const dir = (set.working as { dir: string }).dir
  const empty = { baseline: null, during: null, serverSeconds: null, watchedSeconds: null, signalToDoneSeconds: null, covered: false, snapshotBytes: null }
  const load = getLoad(s, `/api/enrollments/${set.readId}`, SNAPSHOT_CLIENTS, set.token)
  const accounting = () => ({ serverPids: [s.proc!.pid], ourPids: livePids(b.servers.map((x) => x.proc)), database: null })
  try {
    if (s.dirty) await restart(s, b.work)
    // A snapshot is only written when something changed since the last one: one create first.
    const created = await fetch(`http://127.0.0.1:${s.port}/api/enrollments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${set.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(createBody(set, false)),
    })
    if (created.status !== 201) throw new Error(`POST /api/enrollments answered ${created.status}`)
    const records = await keywardRecords(s)
    await settle(livePids(b.servers.map((x) => x.proc)), 'before the snapshot phase', quietTimeoutMs(settings))
    await load(settings.warmupSeconds).result

    const baseline = await measuredRun(() => load(snapshotBaselineSeconds(settings)), accounting())
    console.log(`  without a snapshot:    ${describeRun(baseline)}`)

    // The server's log line: JSON ("snapshot written" with duration_ms) or, in builds before JSON logs, plain text.
    const written = s.log!.watch(/snapshot written(?: in ([\d.]+) s|.*"duration_ms":(\d+))/)
    const failed = s.log!.watch(/snapshot failed(?:: (.*)|.*"error":"([^"]*)")/)
    const watch = watchSnapshots(dir, 25)
    const loadStartedAt = performance.now()
    let readLoad: Load | undefined
    const duringRun = measuredRun(() => (readLoad = load(SNAPSHOT_TIMEOUT_SECONDS + 60)), accounting())
    let signalledAt = performance.now()
    let failure: string | null = null
    let activity: SnapshotActivity
    try {
      await Bun.sleep(SNAPSHOT_LEAD_SECONDS * 1000)
      signalledAt = performance.now()
      process.kill(s.proc!.pid, 'SIGUSR1')
      // Done when the new snapshot.json has replaced the old one (the data dir tells, whatever the log says).
      const deadline = signalledAt + SNAPSHOT_TIMEOUT_SECONDS * 1000
      for (;;) {
        if (watch.current().finished > 0) break
        if (failed.found()) failure = `the server logged: snapshot failed: ${failed.found()![1] ?? failed.found()![2]}`
        else if (!running(s.proc)) failure = `the server exited (${s.proc!.exitCode ?? s.proc!.signalCode})`
        else if (performance.now() > deadline) failure = `no new snapshot.json within ${SNAPSHOT_TIMEOUT_SECONDS} s of SIGUSR1`
        if (failure) break
        await Bun.sleep(25)
      }
      activity = watch.current()
      await Bun.sleep(SNAPSHOT_LEAD_SECONDS * 1000)
    } finally {
      readLoad?.stop()
    }
    const during = await duringRun
    const stoppedAt = performance.now()
    await watch.stop()
    // The server's own figure, if it logged one.
    const found = written.found()
    const serverSeconds = found ? (found[1] !== undefined ? Number(found[1]) : Number(found[2]) / 1000) : null
    written.stop()
    failed.stop()
    const finishedAt = activity.lastFinishedAt
    // Covered: wrk was running before the temp file appeared and still after the rename.
    const covered =
      failure === null &&
      finishedAt !== null &&
      (activity.firstStartedAt ?? signalledAt) >= loadStartedAt &&
      during.seconds * 1000 >= finishedAt - loadStartedAt &&
      finishedAt < stoppedAt
    const snapshotBytes = await stat(join(dir, 'snapshot.json')).then((i) => i.size, () => null)
    const result: SnapshotPhase = {
      baseline,
      during,
      serverSeconds,
      watchedSeconds: activity.firstStartedAt !== null && finishedAt !== null ? (finishedAt - activity.firstStartedAt) / 1000 : null,
      signalToDoneSeconds: finishedAt !== null ? (finishedAt - signalledAt) / 1000 : null,
      covered,
      records,
      snapshotBytes,
      note: failure,
    }
    console.log(
      `  during the snapshot:   ${describeRun(during)}; p99.9 ${during.p999Ms.toFixed(2)} ms, max ${during.maxMs.toFixed(2)} ms; snapshot ` +
        `${serverSeconds !== null ? `${serverSeconds.toFixed(2)} s (server log)` : '?'}` +
        `${result.watchedSeconds !== null ? `, ${result.watchedSeconds.toFixed(2)} s temp file → rename` : ''}` +
        (failure ? `; ${failure}` : ''),
    )
    await settle(livePids(b.servers.map((x) => x.proc)), 'after the snapshot phase', quietTimeoutMs(settings))
    return result
  } catch (error) {
    const note = `not measured: ${firstLine((error as Error)?.message ?? String(error))}`
    console.log(`  ${note}`)
    return { ...empty, records: null, note }
  }
}

// ---------------------------------------------------------------------------------------------

onInterrupt(async () => {
  interrupted = true
  await cleanup()
})
try {
  process.exitCode = await main()
} catch (error) {
  console.error(`bench/run.ts: ${(error as Error)?.stack ?? error}`)
  process.exitCode = 1
}
