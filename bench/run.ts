#!/usr/bin/env bun
/**
 * The benchmark of issue 5 (`npm run bench`, `npm run bench -- --quick`): keyward against the
 * limit (a bare Bun.serve answering the same bytes) and against json-server, the classic
 * lowdb-backed REST server, in one run on this machine, with wrk as the load generator.
 *
 * Data sets of 1,000, 100,000 and 1,000,000 records (rows stored): 1 vendor, 1 customer, 10
 * applications of the customer (environment PRODUCTION) and E = round((N - 12) / 3) enrollments,
 * each with its own consumer and installation, spread round-robin over the applications. keyward's
 * data dirs are built through the store (bench/support/dataset.ts, in child processes, in parallel);
 * json-server gets the same records in a db.json, each with `id` = its primary key.
 *
 * Phases, at each size, alternating servers and sizes within each round:
 *   read by id       keyward GET /api/enrollments/{id} (customer admin token), json-server
 *                    GET /enrollments/{id}, bare Bun.serve (keyward's bytes)         64 connections
 *   filtered page    GET /api/enrollments?application_ids=X&page=1&page_size=25 vs
 *                    GET /enrollments?application_id=X&_page=1&_limit=25               4 connections
 *   create           POST /api/enrollments (durable: fsynced before the 201) vs POST /enrollments,
 *                    fresh ids per request (bench/run-create.lua)                   1 and 64 connections
 * and at 1,000,000 records: start-up time (spawn until it answers), VmRSS per record once ready,
 * read latency (p99.9, max) under a read load while keyward writes a snapshot (SIGUSR1).
 *
 * Writes docs/benchmarks.md and docs/benchmarks.svg and prints the report. json-server 0.17.4 is
 * installed on first use into bench/.json-server/ (git-ignored) with npm. Needs wrk and node.
 *
 *   ./node_modules/.bin/bun run bench/run.ts [--quick]
 *
 * Every child process is stopped at the end, also on failure and Ctrl-C; temp dirs are removed.
 */
import { link, mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildInChild, ENVIRONMENT, type BuildPlan } from './support/dataset'
import { Children, freePort, normaliseResponse, onInterrupt, parseResponse, rawGet, tailOf, waitReady } from './support/servers'
import { busyBeforeStart, cpuSeconds, machineBusySeconds, mib, ownCpuSeconds, procStatus, waitQuiet } from './support/system'
import { findWrk, formatMs, runWrk, startWrk, WRK_THREADS, wrkMissing, type WrkResult } from './support/wrk'
import { watchSnapshots, type SnapshotActivity } from './support/snapshots'
import { copyDirDurably, syncAll } from './support/files'
import {
  MODE,
  SMALLEST,
  LARGEST,
  SIZES,
  APPLICATIONS,
  FIXED_RECORDS,
  ROUNDS,
  WARMUP_SECONDS,
  RUN_SECONDS,
  SLOW_RUN_CAP_SECONDS,
  READ_CLIENTS,
  PAGE_CLIENTS,
  PAGE_SIZE,
  CREATE_CLIENTS,
  SNAPSHOT_CLIENTS,
  SNAPSHOT_LEAD_SECONDS,
  SNAPSHOT_BASELINE_SECONDS,
  SNAPSHOT_TIMEOUT_SECONDS,
  WRK_TIMEOUT_SECONDS,
  START_TIMEOUT_MS,
  QUIET_TIMEOUT_MS,
  NO_WARMUP_ABOVE_MS,
  DISTURBED_CORES,
  JSON_SERVER_VERSION,
  JSON_SERVER_HEAP_MB,
  fmt,
  sizeLabel,
  type Kind,
  type LadderKind,
  LADDER,
  type Phase,
  type DataSet,
  type Server,
  type Run,
  outcomeOf,
  type SnapshotPhase,
} from './support/run-model'
import { times, report, chart } from './support/run-report'

// ---------------------------------------------------------------------------------------------
// Settings

const args = process.argv.slice(2)
for (const arg of args) {
  if (arg !== '--quick') {
    console.error(`bench/run.ts: unknown argument '${arg}'\nusage: bun run bench/run.ts [--quick]`)
    process.exit(2)
  }
}

const ROOT = join(import.meta.dir, '..')
const BUN = process.execPath
const JSON_SERVER_DIR = join(import.meta.dir, '.json-server')
const JSON_SERVER_BIN = join(JSON_SERVER_DIR, 'node_modules', 'json-server', 'lib', 'cli', 'bin.js')
const GET_SCRIPT = join(import.meta.dir, 'run-get.lua')
const CREATE_SCRIPT = join(import.meta.dir, 'run-create.lua')
const DOCS = join(ROOT, 'docs')

const children = new Children()
let workDir: string | undefined
/** Set on Ctrl-C: whatever is still running stops quietly while the cleanup runs. */
let interrupted = false


// ---------------------------------------------------------------------------------------------
// Main

async function main(): Promise<number> {
  const wrk = findWrk()
  if (!wrk) {
    console.error(wrkMissing('bench/run.ts'))
    return 1
  }
  if (!Bun.which('node')) {
    console.error('bench/run.ts needs node (json-server runs on it); install Node.js 18 or later.')
    return 1
  }
  const work = await mkdtemp(join(tmpdir(), 'keyward-bench-'))
  workDir = work
  try {
    return await run(wrk, work)
  } finally {
    // SIGKILL: the data dirs are temporary, and a graceful stop would first write a snapshot of
    // up to a million records, for nothing. The write-ahead log keeps them consistent anyway.
    await children.stopAll({ signal: 'SIGKILL' })
    await rm(work, { recursive: true, force: true })
  }
}

async function run(wrk: string, work: string): Promise<number> {
  const started = performance.now()
  const elapsed = () => `${((performance.now() - started) / 1000).toFixed(0)} s`
  console.log(
    `keyward benchmark (${MODE}: ${SIZES.map(sizeLabel).join(' / ')} records; ${ROUNDS} round${ROUNDS > 1 ? 's' : ''}, ` +
      `${WARMUP_SECONDS}s warm-up + ${RUN_SECONDS}s per run; wrk -t${WRK_THREADS}; temp files in ${work})`,
  )
  await ensureJsonServer()
  const busy = await busyBeforeStart()
  if (busy) console.log(`CPU busy before start (other processes): ${busy} of all cores`)

  // 1. Data sets, all at once (nothing else runs yet).
  console.log(`building the data sets through the store (keyward data dirs and json-server db.json files)...`)
  const sets = await Promise.all(SIZES.map((size) => buildSet(work, size)))
  console.log(`built in ${elapsed()}`)

  // 2. Servers, one at a time from the largest, so that start-up times are not disturbed.
  const servers: Server[] = []
  for (const set of [...sets].reverse()) {
    const keyward = newServer('keyward', set, work)
    await startKeyward(keyward)
    servers.push(keyward)
    await waitQuiet(livePids(servers), { timeoutMs: QUIET_TIMEOUT_MS * 4 })
    const jsonServer = newServer('json-server', set, work)
    await startJsonServer(jsonServer)
    servers.push(jsonServer)
    await waitQuiet(livePids(servers), { timeoutMs: QUIET_TIMEOUT_MS * 4 })
  }
  const keywardOf = (size: number) => servers.find((s) => s.kind === 'keyward' && s.set!.size === size)!
  const jsonServerOf = (size: number) => servers.find((s) => s.kind === 'json-server' && s.set!.size === size)!

  // The limit: a bare Bun.serve with keyward's own answer to the read (status, headers, body).
  const bare = await startBare(keywardOf(SMALLEST), work)
  servers.push(bare)
  const ladder: Server[] = []
  for (const kind of Object.keys(LADDER) as LadderKind[]) ladder.push(await startLadder(kind, bare, work))
  servers.push(...ladder)

  // 3. Check every server answers right before measuring anything.
  for (const s of servers) {
    if (s.kind === 'keyward') await checkKeyward(s)
    if (s.kind === 'json-server') await checkJsonServer(s)
  }
  // json-server's check wrote its whole db.json, without fsync: out of the page cache before measuring.
  const synced = await syncAll()
  await waitQuiet(livePids(servers), { timeoutMs: QUIET_TIMEOUT_MS * 4 })
  console.log(`servers ready and checked (${elapsed()}; sync took ${synced.toFixed(1)} s)\n`)

  // 4. Measure. Phase by phase; within a round every size and server in turn, the order reversed
  // every other round, so that the noise of a shared machine hits all sides alike.
  const order = <T>(items: T[], round: number) => (round % 2 === 0 ? [...items].reverse() : items)
  const all = () => servers

  console.log(`read by id (${READ_CLIENTS} connections) · at ${elapsed()}`)
  for (let round = 1; round <= ROUNDS; round++) {
    for (const size of order([...SIZES], round)) {
      // The ladder's steps do not depend on the data either: measured once a round, beside the smallest set.
      for (const s of order([bare, ...(size === SMALLEST ? ladder : []), keywardOf(size), jsonServerOf(size)], round)) {
        await measure(wrk, s, 'read', size, readArgs(s), { warmup: s.checkReadMs > NO_WARMUP_ABOVE_MS ? 0 : WARMUP_SECONDS, seconds: RUN_SECONDS, round }, all())
      }
    }
  }

  console.log(`filtered page (${PAGE_CLIENTS} connections) · at ${elapsed()}`)
  for (let round = 1; round <= ROUNDS; round++) {
    for (const size of order([...SIZES], round)) {
      for (const s of order([keywardOf(size), jsonServerOf(size)], round)) {
        await measure(wrk, s, 'page', size, pageArgs(s), { warmup: s.checkPageMs > NO_WARMUP_ABOVE_MS ? 0 : WARMUP_SECONDS, seconds: RUN_SECONDS, round }, all())
      }
    }
  }

  // Before the creates, so that the data set is still the size it was built.
  console.log(`reads while keyward writes a snapshot of ${sizeLabel(LARGEST)} records (${SNAPSHOT_CLIENTS} connections) · at ${elapsed()}`)
  const snapshot = await snapshotPhase(wrk, keywardOf(LARGEST), all())

  for (const clients of CREATE_CLIENTS) {
    const phase: Phase = clients === 1 ? 'create1' : 'create64'
    console.log(`create (${clients} connection${clients > 1 ? 's' : ''}) · at ${elapsed()}`)
    for (let round = 1; round <= ROUNDS; round++) {
      for (const size of order([...SIZES], round)) {
        for (const s of order([keywardOf(size), jsonServerOf(size)], round)) {
          // json-server: no warm-up (every warm-up write would have to be undone by a restart;
          // its reads warmed it up); at the large sizes runs long enough to see a few writes.
          const seconds =
            s.kind === 'json-server' ? Math.max(RUN_SECONDS, Math.min(SLOW_RUN_CAP_SECONDS, Math.ceil(3 * s.checkCreateSeconds))) : RUN_SECONDS
          const warmup = s.kind === 'json-server' ? 0 : WARMUP_SECONDS
          // keyward's warm-up: one connection (the same code warmed up, a fraction of the rows added).
          await measure(wrk, s, phase, size, (nonce) => createArgs(s, clients, nonce), { warmup, seconds, round, warmupArgs: (nonce) => createArgs(s, 1, nonce) }, all())
        }
      }
    }
  }

  for (const s of servers) {
    if (s.proc && s.proc.exitCode === null && s.proc.signalCode === null) {
      s.memory = { rss: await procStatus(s.proc.pid, 'VmRSS'), hwm: await procStatus(s.proc.pid, 'VmHWM') }
    }
  }

  // 5. Report.
  const wallSeconds = (performance.now() - started) / 1000
  const { markdown, failed } = report({ sets, servers, bare, snapshot, busy, wallSeconds, bareBytes, bareBodyBytes })
  await mkdir(DOCS, { recursive: true })
  await writeFile(join(DOCS, 'benchmarks.md'), markdown)
  await writeFile(join(DOCS, 'benchmarks.svg'), chart(sets))
  console.log('\n' + markdown)
  console.log(`written to docs/benchmarks.md and docs/benchmarks.svg (${elapsed()} in all)`)
  return failed ? 1 : 0
}

// ---------------------------------------------------------------------------------------------
// json-server, data sets, servers

/** Installs json-server (pinned) into bench/.json-server/ unless it is there already. */
async function ensureJsonServer(): Promise<void> {
  const pkg = Bun.file(join(JSON_SERVER_DIR, 'node_modules', 'json-server', 'package.json'))
  if ((await pkg.exists()) && ((await pkg.json()) as { version: string }).version === JSON_SERVER_VERSION) return
  const npm = Bun.which('npm')
  if (!npm) throw new Error(`json-server ${JSON_SERVER_VERSION} is not installed in ${JSON_SERVER_DIR} and npm is not on the PATH`)
  console.log(`installing json-server@${JSON_SERVER_VERSION} into bench/.json-server/ (once)...`)
  await mkdir(JSON_SERVER_DIR, { recursive: true })
  const proc = children.spawn(
    [npm, 'install', '--prefix', JSON_SERVER_DIR, '--no-audit', '--no-fund', '--loglevel=error', `json-server@${JSON_SERVER_VERSION}`],
    { cwd: JSON_SERVER_DIR, stdin: 'ignore', stdout: 'inherit', stderr: 'inherit' },
  )
  if ((await proc.exited) !== 0) throw new Error(`npm install json-server@${JSON_SERVER_VERSION} failed (exit ${proc.exitCode})`)
}

async function buildSet(work: string, size: number): Promise<DataSet> {
  const label = sizeLabel(size)
  const enrollments = Math.round((size - FIXED_RECORDS) / 3)
  const pristineDir = join(work, `keyward-${label}.pristine`)
  const pristineDb = join(work, `json-server-${label}.pristine.json`)
  const plan: BuildPlan = {
    dir: pristineDir,
    label,
    jsonServerDb: pristineDb,
    customers: [{ description: 'Customer', applications: APPLICATIONS, enrollments, enrollmentsPerConsumer: 1, spareConsumerEvery: 0 }],
  }
  const meta = await buildInChild(plan, { planFile: join(work, `plan-${label}.json`), metaFile: join(work, `meta-${label}.json`), cwd: ROOT }, (cmd, options) =>
    children.spawn(cmd, options),
  )
  const customer = meta.customers[0]!
  const appsFile = join(work, `apps-${label}.txt`)
  await writeFile(appsFile, customer.applicationIds.join('\n') + '\n')
  return {
    size,
    label,
    meta,
    pristineDir,
    dir: join(work, `keyward-${label}`),
    pristineDb,
    customerId: customer.organizationId,
    applicationIds: customer.applicationIds,
    readId: customer.middleEnrollmentId!,
    pageApp: customer.applicationIds[0]!,
    appsFile,
    token: customer.adminToken,
  }
}

function newServer(kind: Kind, set: DataSet | null, work: string): Server {
  const name = set ? `${kind} ${set.label}` : kind
  return {
    kind,
    name,
    set,
    port: 0,
    proc: null,
    logFile: join(work, `${name.replace(/\s+/g, '-')}.log`),
    startupSeconds: null,
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

/** The environment without KEYWARD_* settings of the caller's shell: the benchmark says what it runs. */
function serverEnv(): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('KEYWARD_')))
}

async function startKeyward(s: Server): Promise<void> {
  const set = s.set!
  await rm(set.dir, { recursive: true, force: true })
  await copyDirDurably(set.pristineDir, set.dir)
  s.port = await freePort()
  const begun = performance.now()
  s.proc = children.spawn([BUN, 'run', 'src/main.ts', 'serve', '--data', set.dir, '--port', String(s.port)], {
    cwd: ROOT,
    env: serverEnv(),
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: Bun.file(s.logFile),
  })
  await waitReady(s.name, s.proc, `http://127.0.0.1:${s.port}/healthz`, { timeoutMs: START_TIMEOUT_MS, log: () => tailOf(s.logFile) })
  const seconds = (performance.now() - begun) / 1000
  const rss = await procStatus(s.proc.pid, 'VmRSS')
  if (s.startupSeconds === null) {
    s.startupSeconds = seconds
    s.rssAtReady = rss
  }
  s.dirty = false
  console.log(`  ${s.name.padEnd(16)} answers /healthz after ${seconds.toFixed(2)} s, VmRSS ${mib(rss)} MiB${s.restarts > 0 ? ` (restart ${s.restarts})` : ''}`)
}

/** Stops a server now (SIGKILL: its data is a throw-away copy), noting its memory first. */
async function kill(s: Server): Promise<void> {
  if (!s.proc) return
  if (s.proc.exitCode === null && s.proc.signalCode === null) {
    s.memory = { rss: await procStatus(s.proc.pid, 'VmRSS'), hwm: await procStatus(s.proc.pid, 'VmHWM') }
  }
  await children.stop(s.proc, { signal: 'SIGKILL' })
}

/** Starts a server again on a fresh copy of its pristine data. */
async function restart(s: Server): Promise<void> {
  await kill(s)
  s.restarts++
  if (s.kind === 'keyward') await startKeyward(s)
  else if (s.kind === 'json-server') await startJsonServer(s)
  else throw new Error(`${s.name} cannot be restarted`)
}

/** json-server on a fresh copy of the pristine db.json; a failure to start is a measurement, not an error. */
async function startJsonServer(s: Server): Promise<void> {
  const set = s.set!
  // json-server (lowdb's FileAsync, steno) writes a temp file and renames it over db.json, never in
  // place: a hard link of the pristine file is a fresh copy at no cost.
  const db = jsonServerDbPath(set)
  await dropJsonServerFiles(set)
  await link(set.pristineDb, db)
  s.port = await freePort()
  const begun = performance.now()
  s.proc = children.spawn(
    ['node', `--max-old-space-size=${JSON_SERVER_HEAP_MB}`, JSON_SERVER_BIN, '--quiet', '--host', '127.0.0.1', '--port', String(s.port), '--snapshots', workDir!, db],
    { cwd: workDir!, stdin: 'ignore', stdout: Bun.file(s.logFile), stderr: Bun.file(`${s.logFile}.err`) },
  )
  try {
    // "Until it answers": a read of one record (the vendor, first of a two-record collection).
    await waitReady(s.name, s.proc!, `http://127.0.0.1:${s.port}/organizations/${set.meta.vendorId}`, {
      timeoutMs: START_TIMEOUT_MS,
      intervalMs: 50,
      log: () => tailOf(`${s.logFile}.err`),
    })
  } catch (error) {
    s.failure = `did not start: ${firstLine((error as Error).message)}`
    s.dirty = false // no second try: a start can take up to START_TIMEOUT_MS
    console.log(`  ${s.name.padEnd(16)} ${s.failure}`)
    await kill(s)
    return
  }
  const seconds = (performance.now() - begun) / 1000
  const rss = await procStatus(s.proc!.pid, 'VmRSS')
  if (s.startupSeconds === null) {
    s.startupSeconds = seconds
    s.rssAtReady = rss
  }
  s.failure = null
  s.dirty = false
  console.log(`  ${s.name.padEnd(16)} answers after ${seconds.toFixed(2)} s, VmRSS ${mib(rss)} MiB${s.restarts > 0 ? ` (restart ${s.restarts})` : ''}`)
}

const jsonServerDbPath = (set: DataSet) => join(workDir!, `json-server-${set.label}.json`)

/**
 * Removes json-server's working db.json and steno's temp file: the kernel then drops their dirty
 * pages (json-server never fsyncs) instead of writing them back during some later run.
 */
async function dropJsonServerFiles(set: DataSet): Promise<void> {
  const db = jsonServerDbPath(set)
  await rm(db, { force: true })
  await rm(join(workDir!, `.~${db.slice(workDir!.length + 1)}`), { force: true })
}

async function startBare(keyward: Server, work: string): Promise<Server> {
  const set = keyward.set!
  const path = `/api/enrollments/${set.readId}`
  const auth = `Bearer ${set.token}`
  const keywardAnswer = await rawGet(keyward.port, path, auth)
  const canned = parseResponse(keywardAnswer)
  if (canned.status !== 200) throw new Error(`${keyward.name}: GET ${path} answered ${canned.status}:\n${keywardAnswer}`)
  const responseFile = join(work, 'bare-response.json')
  await writeFile(responseFile, JSON.stringify(canned))
  bareResponseFile = responseFile

  const s = newServer('bare', null, work)
  s.port = await freePort()
  const begun = performance.now()
  s.proc = children.spawn([BUN, 'run', 'bench/bare-server.ts', '--port', String(s.port), '--response', responseFile], {
    cwd: ROOT,
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: Bun.file(s.logFile),
  })
  await waitReady(s.name, s.proc, `http://127.0.0.1:${s.port}/`, { log: () => tailOf(s.logFile) })
  s.startupSeconds = (performance.now() - begun) / 1000
  s.rssAtReady = await procStatus(s.proc.pid, 'VmRSS')
  // Same bytes on the wire, once the per-request Date and trace id are masked.
  const bareAnswer = await rawGet(s.port, path, auth)
  if (normaliseResponse(bareAnswer) !== normaliseResponse(keywardAnswer)) {
    throw new Error(`the bare server's answer differs from keyward's:\n--- keyward\n${keywardAnswer}\n--- bare\n${bareAnswer}`)
  }
  bareRequestSet = set
  bareBytes = Buffer.byteLength(keywardAnswer)
  bareBodyBytes = Buffer.byteLength(canned.body)
  console.log(`  bare Bun.serve     answers keyward's bytes: ${bareBytes} bytes each, body ${bareBodyBytes} bytes (Date and trace id aside)`)
  return s
}

let bareBytes = 0
let bareBodyBytes = 0
let bareResponseFile = ''

/** A step of the ladder, answering like the bare server, plus what the step adds. */
async function startLadder(kind: LadderKind, bare: Server, work: string): Promise<Server> {
  const s = newServer(kind, null, work)
  s.port = await freePort()
  s.proc = children.spawn(
    [BUN, 'run', 'bench/ladder-server.ts', '--variant', kind === 'elysia' ? 'elysia' : 'header', '--port', String(s.port), '--response', bareResponseFile],
    { cwd: ROOT, stdin: 'ignore', stdout: 'ignore', stderr: Bun.file(s.logFile) },
  )
  const path = `/api/enrollments/${bareRequestSet!.readId}`
  // Any answer means it listens (this one has no Authorization header, so it is an error).
  await waitReady(s.name, s.proc, `http://127.0.0.1:${s.port}${path}`, { log: () => tailOf(s.logFile), accept: () => true })
  // The same bytes as the bare server but for the trace id, which must be new and the same twice.
  const auth = `Bearer ${bareRequestSet!.token}`
  const [answer, bareAnswer] = [await rawGet(s.port, path, auth), await rawGet(bare.port, path, auth)]
  const traceIds = [...new Set(answer.match(/[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}/g) ?? [])].filter((id) => !bareAnswer.includes(id))
  if (traceIds.length !== 1 || normaliseResponse(answer) !== normaliseResponse(bareAnswer)) {
    throw new Error(`${s.name}'s answer differs from the bare server's:\n--- bare\n${bareAnswer}\n--- ${s.name}\n${answer}`)
  }
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
  if (page.status !== 200 || items.length !== PAGE_SIZE || (pageBody.total ?? 0) < 33 || items.some((e) => e.application_id !== set.pageApp)) {
    throw new Error(`${s.name}: the filtered page answered ${page.status} with ${items.length} items of ${pageBody.total}`)
  }
  begun = performance.now()
  const created = await fetch(`${base}/api/enrollments`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(createBody(set, false)),
  })
  s.checkCreateSeconds = (performance.now() - begun) / 1000
  if (created.status !== 201) throw new Error(`${s.name}: POST /api/enrollments answered ${created.status}: ${await created.text()}`)
  console.log(`  ${s.name.padEnd(16)} checked: read 200, page ${items.length} of ${pageBody.total}, create 201`)
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
    console.log(`  ${s.name.padEnd(16)} checked: read 200, page ${items.length} of ${total}, create 201 in ${formatMs(s.checkCreateSeconds * 1000)}`)
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

/** Rows keyward holds now: its enrollments total, the consumer and installation of each, and the fixed rows. */
async function keywardRecords(s: Server): Promise<number | null> {
  try {
    const response = await fetch(`http://127.0.0.1:${s.port}/api/enrollments?page_size=1`, { headers: { authorization: `Bearer ${s.set!.token}` } })
    const body = (await response.json()) as { total?: number }
    return typeof body.total === 'number' ? FIXED_RECORDS + 3 * body.total : null
  } catch {
    return null
  }
}

/** Waits until `servers` are quiet (see waitQuiet); says so when they were not within QUIET_TIMEOUT_MS. */
async function settle(servers: Server[], when: string): Promise<void> {
  const { quiet, seconds } = await waitQuiet(livePids(servers), { timeoutMs: QUIET_TIMEOUT_MS })
  if (!quiet) console.log(`    (${when}: the servers were still busy after ${seconds.toFixed(1)} s; going on)`)
}

const livePids = (servers: Server[]) => servers.flatMap((s) => (s.proc && s.proc.exitCode === null && s.proc.signalCode === null ? [s.proc.pid] : []))

// ---------------------------------------------------------------------------------------------
// Requests

function readArgs(s: Server): string[] {
  // The bare server answers anything with the same bytes; it is sent keyward's request (of the smallest set).
  const set = s.set ?? bareRequestSet!
  const path = s.kind === 'json-server' ? `/enrollments/${set.readId}` : `/api/enrollments/${set.readId}`
  return ['-c', String(READ_CLIENTS), '-s', GET_SCRIPT, `http://127.0.0.1:${s.port}${path}`, ...(s.kind === 'json-server' ? [] : authHeader(set.token))]
}

let bareRequestSet: DataSet | undefined

const authHeader = (token: string) => ['-H', `Authorization: Bearer ${token}`]

function pageArgs(s: Server): string[] {
  const set = s.set!
  const url =
    s.kind === 'keyward'
      ? `http://127.0.0.1:${s.port}/api/enrollments?application_ids=${set.pageApp}&page=1&page_size=${PAGE_SIZE}`
      : `http://127.0.0.1:${s.port}/enrollments?application_id=${set.pageApp}&_page=1&_limit=${PAGE_SIZE}`
  return ['-c', String(PAGE_CLIENTS), '-s', GET_SCRIPT, url, ...(s.kind === 'keyward' ? authHeader(set.token) : [])]
}

function createArgs(s: Server, clients: number, nonce: number): string[] {
  const set = s.set!
  const url = s.kind === 'keyward' ? `http://127.0.0.1:${s.port}/api/enrollments` : `http://127.0.0.1:${s.port}/enrollments`
  return ['-c', String(clients), '-s', CREATE_SCRIPT, url, '--', s.kind, set.appsFile, String(nonce), ENVIRONMENT]
}

// ---------------------------------------------------------------------------------------------
// Measuring

/**
 * One run of `server` for `phase` at `size`: restart json-server if a create run left it bigger,
 * wait for every server to go quiet, warm up (discarded), then the measured run with the server's
 * CPU time around it (and, for keyward, its data dir watched for snapshots). A failure is recorded
 * (and the run reported as not measured), not thrown: the other measurements still count.
 */
async function measure(
  wrk: string,
  s: Server,
  phase: Phase,
  size: number,
  wrkArgs: string[] | ((nonce: number) => string[]),
  timing: { warmup: number; seconds: number; round: number; warmupArgs?: (nonce: number) => string[] },
  servers: Server[],
): Promise<void> {
  if (interrupted) return
  const outcome = outcomeOf(phase, s.kind, size)
  const label = `  ${phase.padEnd(8)} ${s.name.padEnd(16)} r${timing.round}`
  const nonce = () => 1 + Math.floor(Math.random() * 0x7ffffff0)
  const argsFor = () => (typeof wrkArgs === 'function' ? wrkArgs(nonce()) : wrkArgs)
  const wrkOptions = {
    timeoutSeconds: WRK_TIMEOUT_SECONDS,
    env: { ...process.env, ...(s.set ? { KEYWARD_TOKEN: s.set.token } : {}) },
    spawn: (cmd: string[], options: Parameters<typeof Bun.spawn>[1]) => children.spawn(cmd, options),
  }
  try {
    if (s.dirty) await restart(s)
    if (s.failure || !s.proc) throw new Error(s.failure ?? 'not running')
    const pid = s.proc.pid
    await settle(servers, `before ${s.name}`)
    if (timing.warmup > 0) {
      await runWrk(wrk, ['-d', `${timing.warmup}s`, ...(timing.warmupArgs ? timing.warmupArgs(nonce()) : argsFor())], wrkOptions)
      await settle([s], `after the warm-up of ${s.name}`)
    }
    const recordsAtStart = s.kind === 'keyward' && phase.startsWith('create') ? await keywardRecords(s) : null
    const watch = s.kind === 'keyward' ? watchSnapshots(s.set!.dir) : null
    const measured = await measuredRun(startWrk(wrk, ['-d', `${timing.seconds}s`, ...argsFor()], wrkOptions), pid, servers).catch(async (error) => {
      await watch?.stop()
      throw error
    })
    const snapshots = watch ? await watch.stop() : null
    const recordsAtEnd = recordsAtStart !== null ? await keywardRecords(s) : null
    const result = measured.result
    outcome.runs.push({ ...result, cpuMicros: measured.cpuMicros, otherCores: measured.otherCores, snapshots, recordsAtStart, recordsAtEnd })
    const cpuMicros = measured.cpuMicros
    console.log(
      `${label} ${result.rps.toFixed(result.rps < 100 ? 2 : 0).padStart(9)} req/s  mean ${formatMs(result.meanMs).padEnd(9)} p99 ${formatMs(result.p99Ms).padEnd(9)}` +
        (cpuMicros !== null ? ` CPU ${cpuMicros.toFixed(cpuMicros < 100 ? 1 : 0)} µs/req` : '') +
        (result.non2xx > 0 ? `  ${result.non2xx} non-2xx` : '') +
        (result.timeouts > 0 ? `  ${result.timeouts} timeouts` : '') +
        (result.socketErrors > 0 ? `  ${result.socketErrors} socket errors` : '') +
        (snapshots?.busy ? `  (snapshot: ${snapshots.started} started, ${snapshots.finished} finished)` : '') +
        (measured.otherCores !== null && measured.otherCores >= DISTURBED_CORES ? `  (other load: ${measured.otherCores.toFixed(2)} cores)` : '') +
        (recordsAtStart !== null ? `  (records ${fmt(recordsAtStart)} → ${recordsAtEnd === null ? '?' : fmt(recordsAtEnd)})` : ''),
    )
    if (phase.startsWith('create')) {
      // The data grew: the next run starts again from the pristine data.
      s.dirty = true
      if (s.kind === 'json-server') {
        // It still has the writes wrk gave up on queued (seconds each at the large sizes): stop it now.
        await kill(s)
        await dropJsonServerFiles(s.set!)
      }
    }
    if (s.proc.exitCode === null) await settle([s], `after ${s.name}`)
  } catch (error) {
    if (interrupted) return
    const exited = s.proc && (s.proc.exitCode !== null || s.proc.signalCode !== null) && !s.dirty
    const message = exited
      ? `${s.name} exited (${s.proc!.exitCode ?? s.proc!.signalCode}): ${firstLine(await tailOf(`${s.logFile}${s.kind === 'json-server' ? '.err' : ''}`, 600))}`
      : firstLine((error as Error)?.message ?? String(error))
    if (exited && s.set) s.dirty = true // try again from the pristine copy next time
    outcome.failures.push(message)
    console.log(`${label} not measured: ${message}`)
  }
}

/**
 * Waits for a wrk run, with the server's CPU time around it, and the CPU that everything else on
 * the machine used meanwhile: the machine's busy time less that of our servers, of wrk (sampled
 * while it runs) and of this process.
 */
async function measuredRun(
  load: ReturnType<typeof startWrk>,
  pid: number,
  servers: Server[],
): Promise<{ result: WrkResult; cpuMicros: number | null; otherCores: number | null }> {
  const pids = livePids(servers)
  const ours = async () => {
    let sum = ownCpuSeconds()
    for (const p of pids) sum += (await cpuSeconds(p)) ?? 0
    return sum
  }
  const [machineBefore, oursBefore, cpuBefore] = [await machineBusySeconds(), await ours(), await cpuSeconds(pid)]
  let wrkCpu = 0
  let finished = false
  const sampler = (async () => {
    while (!finished) {
      wrkCpu = (await cpuSeconds(load.proc.pid)) ?? wrkCpu
      await Bun.sleep(100)
    }
  })()
  const begun = performance.now()
  try {
    const result = await load.result
    const seconds = (performance.now() - begun) / 1000
    const [machineAfter, oursAfter, cpuAfter] = [await machineBusySeconds(), await ours(), await cpuSeconds(pid)]
    const cpuMicros = cpuBefore !== null && cpuAfter !== null && result.requests > 0 ? ((cpuAfter - cpuBefore) / result.requests) * 1e6 : null
    const otherCores =
      machineBefore !== null && machineAfter !== null ? Math.max(0, (machineAfter - machineBefore - (oursAfter - oursBefore) - wrkCpu) / seconds) : null
    return { result, cpuMicros, otherCores }
  } finally {
    finished = true
    await sampler
  }
}

/**
 * Reads (GET by id, SNAPSHOT_CLIENTS connections) while keyward writes a snapshot: first a baseline
 * run without one, then a run that starts SNAPSHOT_LEAD_SECONDS before SIGUSR1 and is stopped
 * SNAPSHOT_LEAD_SECONDS after the new snapshot.json is in place, so it covers the whole write.
 */
async function snapshotPhase(wrk: string, s: Server, servers: Server[]): Promise<SnapshotPhase> {
  const set = s.set!
  const empty = { baseline: null, during: null, duringOtherCores: null, serverSeconds: null, watchedSeconds: null, signalToDoneSeconds: null, covered: false, snapshotBytes: null }
  const source = await Bun.file(join(ROOT, 'src', 'cli', 'serve.ts')).text()
  if (!source.includes('SIGUSR1')) {
    const note = 'not measured: src/cli/serve.ts has no SIGUSR1 handler ("write a snapshot now") yet'
    console.log(`  ${note}`)
    return { ...empty, records: null, note }
  }
  const args = ['-c', String(SNAPSHOT_CLIENTS), '-s', GET_SCRIPT, `http://127.0.0.1:${s.port}/api/enrollments/${set.readId}`, ...authHeader(set.token)]
  const wrkOptions = { timeoutSeconds: WRK_TIMEOUT_SECONDS, spawn: (cmd: string[], options: Parameters<typeof Bun.spawn>[1]) => children.spawn(cmd, options) }
  try {
    const pid = s.proc!.pid
    // A snapshot is only written when something changed since the last one: one create first.
    const created = await fetch(`http://127.0.0.1:${s.port}/api/enrollments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${set.token}`, 'content-type': 'application/json' },
      body: JSON.stringify(createBody(set, false)),
    })
    if (created.status !== 201) throw new Error(`POST /api/enrollments answered ${created.status}`)
    const records = await keywardRecords(s)
    await waitQuiet(livePids(servers), { timeoutMs: QUIET_TIMEOUT_MS })
    await runWrk(wrk, ['-d', `${WARMUP_SECONDS}s`, ...args], wrkOptions)

    const measured = await measuredRun(startWrk(wrk, ['-d', `${SNAPSHOT_BASELINE_SECONDS}s`, ...args], wrkOptions), pid, servers)
    const baseline: Run = {
      ...measured.result,
      cpuMicros: measured.cpuMicros,
      otherCores: measured.otherCores,
      snapshots: null,
      recordsAtStart: null,
      recordsAtEnd: null,
    }
    console.log(`  without a snapshot: p99.9 ${formatMs(baseline.p999Ms)}, max ${formatMs(baseline.maxMs)}, ${baseline.rps.toFixed(0)} req/s`)

    const logBefore = (await Bun.file(s.logFile).text()).length
    const serverLog = async () => (await Bun.file(s.logFile).text()).slice(logBefore)
    const watch = watchSnapshots(set.dir, 25)
    const loadStartedAt = performance.now()
    const load = startWrk(wrk, ['-d', `${SNAPSHOT_TIMEOUT_SECONDS + 60}s`, ...args], wrkOptions)
    const duringRun = measuredRun(load, pid, servers)
    let signalledAt = performance.now()
    let failure: string | null = null
    let activity: SnapshotActivity
    try {
      await Bun.sleep(SNAPSHOT_LEAD_SECONDS * 1000)
      signalledAt = performance.now()
      process.kill(pid, 'SIGUSR1')
      // Done when the new snapshot.json has replaced the old one (the data dir tells, whatever the log says).
      const deadline = signalledAt + SNAPSHOT_TIMEOUT_SECONDS * 1000
      for (;;) {
        if (watch.current().finished > 0) break
        const failed = /snapshot failed: (.*)/.exec(await serverLog())
        if (failed) failure = `the server logged: snapshot failed: ${failed[1]}`
        else if (s.proc!.exitCode !== null || s.proc!.signalCode !== null) failure = `the server exited (${s.proc!.exitCode ?? s.proc!.signalCode})`
        else if (performance.now() > deadline) failure = `no new snapshot.json within ${SNAPSHOT_TIMEOUT_SECONDS} s of SIGUSR1`
        if (failure) break
        await Bun.sleep(25)
      }
      activity = watch.current()
      await Bun.sleep(SNAPSHOT_LEAD_SECONDS * 1000)
    } finally {
      load.stop()
    }
    const { result: during, otherCores: duringOther } = await duringRun
    const stoppedAt = performance.now()
    await watch.stop()
    // The server's own figure, if it logged one ("snapshot written in X s").
    const logged = /snapshot written in ([\d.]+) s/.exec(await serverLog())
    const serverSeconds = logged ? Number(logged[1]) : null
    const finishedAt = activity.lastFinishedAt
    // Covered: wrk was running before the temp file appeared and still after the rename.
    const covered =
      failure === null &&
      finishedAt !== null &&
      (activity.firstStartedAt ?? signalledAt) >= loadStartedAt &&
      during.seconds * 1000 >= finishedAt - loadStartedAt &&
      finishedAt < stoppedAt
    const snapshotBytes = await stat(join(set.dir, 'snapshot.json')).then((i) => i.size, () => null)
    const result: SnapshotPhase = {
      baseline,
      during,
      duringOtherCores: duringOther,
      serverSeconds,
      watchedSeconds: activity.firstStartedAt !== null && finishedAt !== null ? (finishedAt - activity.firstStartedAt) / 1000 : null,
      signalToDoneSeconds: finishedAt !== null ? (finishedAt - signalledAt) / 1000 : null,
      covered,
      records,
      snapshotBytes,
      note: failure,
    }
    console.log(
      `  during the snapshot: p99.9 ${formatMs(during.p999Ms)}, max ${formatMs(during.maxMs)}, ${during.rps.toFixed(0)} req/s` +
        (during.non2xx > 0 ? `, ${during.non2xx} non-2xx` : '') +
        (during.timeouts > 0 ? `, ${during.timeouts} timeouts` : '') +
        `; snapshot ${serverSeconds !== null ? `${serverSeconds.toFixed(2)} s (server log)` : '?'}` +
        `${result.watchedSeconds !== null ? `, ${result.watchedSeconds.toFixed(2)} s temp file → rename` : ''}` +
        (failure ? `; ${failure}` : ''),
    )
    await waitQuiet(livePids(servers), { timeoutMs: QUIET_TIMEOUT_MS })
    return result
  } catch (error) {
    const note = `not measured: ${firstLine((error as Error)?.message ?? String(error))}`
    console.log(`  ${note}`)
    return { ...empty, records: null, note }
  }
}

const firstLine = (text: string) => text.trim().split('\n')[0]!.slice(0, 300)

// ---------------------------------------------------------------------------------------------

onInterrupt(async () => {
  interrupted = true
  await children.stopAll({ signal: 'SIGKILL' })
  if (workDir) await rm(workDir, { recursive: true, force: true })
})
try {
  process.exitCode = await main()
} catch (error) {
  console.error(`bench/run.ts: ${(error as Error)?.stack ?? error}`)
  process.exitCode = 1
}
