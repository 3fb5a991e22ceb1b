#!/usr/bin/env bun
/**
 * Hand-run HTTP benchmark (not a test). Measures, in one run on this machine, two ratios that stay
 * meaningful on a shared, noisy machine:
 *
 *  (a) authenticated GET /api/organizations/{id}, keyward vs a bare Bun.serve answering the same
 *      bytes (bench/bare-server.ts)                        target: keyward ≥ 70% of bare
 *  (b) durable POST /api/organizations, 64 concurrent clients vs 1 client    target: ≥ 10×
 *
 *   ./node_modules/.bin/bun run bench/http.ts [--quick]
 *
 * Needs `wrk` on the PATH. Starts both servers on a fresh temp data dir and random free ports, runs
 * each phase after a short warm-up, alternates the two sides of each comparison twice and keeps the
 * best of each, prints a table and writes it to bench/results/http.md. Beside req/s it reports the
 * server's CPU time per request (from /proc), which other load on the machine disturbs much less.
 * Servers are stopped at the end, even on failure.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import { Children, freePort, normaliseResponse as normalise, onInterrupt, parseResponse, rawGet, tailOf, waitReady } from './support/servers'
import { busyBeforeStart, cpuSeconds } from './support/system'
import { formatMs, runWrk as runWrkRaw } from './support/wrk'

const QUICK = process.argv.includes('--quick')
const WARMUP_SECONDS = QUICK ? 1 : 2
const RUN_SECONDS = QUICK ? 2 : 5
const ROUNDS = 2
const GET_CLIENTS = 64
const POST_CLIENTS = [1, 64] as const
// wrk and the server share the machine: give wrk about half the cores.
const WRK_THREADS = Math.max(1, Math.floor(cpus().length / 2))
const TARGET_GET_RATIO = 0.7
const TARGET_POST_RATIO = 10

const ROOT = join(import.meta.dir, '..')
const BUN = process.execPath
const children = new Children()
const stderrFiles = new Map<Subprocess, string>()

interface WrkResult {
  readonly rps: number
  readonly p99: string
  readonly requests: number
  /** Server CPU time (all its threads) per request: steadier than req/s when others share the CPU. */
  readonly cpuMicros: number | null
}

interface Row {
  readonly phase: string
  readonly side: string
  readonly runs: WrkResult[]
}

async function main(): Promise<number> {
  const wrk = Bun.which('wrk')
  if (!wrk) {
    console.error('bench/http.ts needs wrk, the HTTP load generator. Install it with:\n\n  apt-get update && apt-get install -y wrk\n')
    return 1
  }
  const work = await mkdtemp(join(tmpdir(), 'keyward-bench-'))
  try {
    return await run(wrk, work)
  } finally {
    await stopAll()
    await rm(work, { recursive: true, force: true })
  }
}

async function run(wrk: string, work: string): Promise<number> {
  const mode = QUICK ? 'quick' : 'full'
  console.log(`keyward HTTP benchmark (${mode}: ${WARMUP_SECONDS}s warm-up + ${RUN_SECONDS}s per run, ${ROUNDS} rounds, wrk -t${WRK_THREADS})`)
  const busy = await busyBeforeStart()
  if (busy) console.log(`CPU busy before the servers start (other processes): ${busy} of all cores`)

  // keyward on an empty data dir: its first stdout line is the vendor id and an admin token.
  const dataDir = join(work, 'data')
  const keywardPort = await freePort()
  const stdoutFile = join(work, 'keyward.stdout')
  const keyward = start('keyward', [BUN, 'run', 'src/main.ts', 'serve', '--data', dataDir, '--port', String(keywardPort)], work, stdoutFile)
  await waitHealthy('keyward', keyward, keywardPort)
  const first = JSON.parse((await Bun.file(stdoutFile).text()).split('\n')[0]!) as { organization_id: string; token: string }
  const auth = `Bearer ${first.token}`

  // One customer to read back; its GET response is what the bare server will replay.
  const created = await fetch(`http://127.0.0.1:${keywardPort}/api/organizations`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: JSON.stringify({ description: 'bench', parent_id: first.organization_id }),
  })
  if (created.status !== 201) throw new Error(`POST /api/organizations answered ${created.status}: ${await created.text()}`)
  const customerId = ((await created.json()) as { organization: { organization_id: string } }).organization.organization_id
  const getPath = `/api/organizations/${customerId}`

  const keywardAnswer = await rawGet(keywardPort, getPath, auth)
  const canned = parseResponse(keywardAnswer)
  if (canned.status !== 200) throw new Error(`GET ${getPath} answered ${canned.status}`)
  const responseFile = join(work, 'response.json')
  await writeFile(responseFile, JSON.stringify(canned))

  const barePort = await freePort()
  const bare = start('bare', [BUN, 'run', 'bench/bare-server.ts', '--port', String(barePort), '--response', responseFile], work)
  await waitHealthy('bare', bare, barePort)
  // Same bytes on the wire, once the per-request Date and trace id are masked.
  const bareAnswer = await rawGet(barePort, getPath, auth)
  if (normalise(bareAnswer) !== normalise(keywardAnswer)) {
    throw new Error(`the bare server's answer differs from keyward's:\n--- keyward\n${keywardAnswer}\n--- bare\n${bareAnswer}`)
  }
  console.log(`responses match: ${keywardAnswer.length} bytes each (status ${canned.status}, ${canned.headers.length} headers + Date, Content-Length)\n`)

  // (a) GET: alternate bare / keyward.
  const getArgs = (port: number) => ['-c', String(GET_CLIENTS), '-H', `Authorization: ${auth}`, `http://127.0.0.1:${port}${getPath}`]
  const getBare: Row = { phase: `GET, ${GET_CLIENTS} clients`, side: 'bare Bun.serve', runs: [] }
  const getKeyward: Row = { phase: `GET, ${GET_CLIENTS} clients`, side: 'keyward', runs: [] }
  for (let round = 1; round <= ROUNDS; round++) {
    getBare.runs.push(await measure(wrk, `GET bare    round ${round}`, bare, getArgs(barePort)))
    getKeyward.runs.push(await measure(wrk, `GET keyward round ${round}`, keyward, getArgs(keywardPort)))
  }

  // (b) durable POST: alternate 1 client / 64 clients.
  const env = { ...process.env, KEYWARD_VENDOR_ID: first.organization_id, KEYWARD_TOKEN: first.token }
  const postUrl = `http://127.0.0.1:${keywardPort}/api/organizations`
  const postRows: Row[] = POST_CLIENTS.map((c) => ({ phase: 'durable POST', side: `keyward, ${c} client${c > 1 ? 's' : ''}`, runs: [] }))
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [i, c] of POST_CLIENTS.entries()) {
      const args = ['-c', String(c), '-s', join(import.meta.dir, 'post.lua'), postUrl]
      postRows[i]!.runs.push(await measure(wrk, `POST ${String(c).padStart(2)} clients round ${round}`, keyward, args, env))
    }
  }

  const getRatio = best(getKeyward) / best(getBare)
  const postRatio = best(postRows[1]!) / best(postRows[0]!)
  let report = renderReport([getBare, getKeyward, ...postRows], [
    ['GET keyward / bare', `${(getRatio * 100).toFixed(1)}%`, `≥ ${TARGET_GET_RATIO * 100}%`, getRatio >= TARGET_GET_RATIO],
    ['POST 64 clients / 1 client', `${postRatio.toFixed(1)}×`, `≥ ${TARGET_POST_RATIO}×`, postRatio >= TARGET_POST_RATIO],
  ])
  const cpu = [getBare, getKeyward, ...postRows].map(lowestCpu)
  if (!cpu.includes(null)) {
    const [bareCpu, keywardCpu, post1Cpu, post64Cpu] = cpu as number[]
    report +=
      `\nServer CPU per request (lowest run; less sensitive to other load than req/s): GET bare ${bareCpu!.toFixed(1)} µs, ` +
      `keyward ${keywardCpu!.toFixed(1)} µs (${(keywardCpu! / bareCpu!).toFixed(1)}× bare); ` +
      `POST 1 client ${post1Cpu!.toFixed(1)} µs, 64 clients ${post64Cpu!.toFixed(1)} µs.\n`
  }
  console.log('\n' + report)
  await mkdir(join(import.meta.dir, 'results'), { recursive: true })
  await Bun.write(join(import.meta.dir, 'results', 'http.md'), `# keyward HTTP benchmark\n\n${machineLine(mode)}${busy ? ` · CPU busy before start: ${busy}` : ''}\n\n${report}`)
  console.log('written to bench/results/http.md')
  return 0
}

/** One warm-up run (discarded), then the measured run. */
async function measure(wrk: string, label: string, server: Subprocess, args: string[], env?: Record<string, string | undefined>): Promise<WrkResult> {
  await runWrk(wrk, [`-d${WARMUP_SECONDS}s`, ...args], env)
  const cpuBefore = await cpuSeconds(server.pid)
  const result = await runWrk(wrk, [`-d${RUN_SECONDS}s`, '--latency', ...args], env)
  const cpuAfter = await cpuSeconds(server.pid)
  const cpuMicros = cpuBefore !== null && cpuAfter !== null ? ((cpuAfter - cpuBefore) / result.requests) * 1e6 : null
  const cpu = cpuMicros !== null ? `   server CPU ${cpuMicros.toFixed(1)} µs/req` : ''
  console.log(`  ${label.padEnd(26)} ${result.rps.toFixed(0).padStart(8)} req/s   p99 ${result.p99.padEnd(8)}${cpu}`)
  return { ...result, cpuMicros }
}

/** wrk; answers other than 2xx make the figures meaningless: refused. */
async function runWrk(wrk: string, args: string[], env?: Record<string, string | undefined>): Promise<Omit<WrkResult, 'cpuMicros'>> {
  const result = await runWrkRaw(wrk, args, { env: env ?? process.env })
  if (result.non2xx > 0) throw new Error(`wrk saw ${result.non2xx} non-2xx answers; the figures would be meaningless:\n${result.output}`)
  const socketErrors = /Socket errors:.*/.exec(result.output)
  if (socketErrors) console.warn(`  (wrk: ${socketErrors[0]})`)
  return { rps: result.rps, p99: formatMs(result.p99Ms), requests: result.requests }
}

const best = (row: Row) => Math.max(...row.runs.map((r) => r.rps))

function lowestCpu(row: Row): number | null {
  const values = row.runs.map((r) => r.cpuMicros)
  return values.includes(null) ? null : Math.min(...(values as number[]))
}

function renderReport(rows: Row[], ratios: [string, string, string, boolean][]): string {
  const runHeads = rows[0]!.runs.map((_, i) => `run ${i + 1}: req/s (p99, server CPU/req)`)
  const lines = [
    `| phase | server | ${runHeads.join(' | ')} | best req/s |`,
    `| --- | --- | ${runHeads.map(() => '---:').join(' | ')} | ---: |`,
    ...rows.map((r) => `| ${r.phase} | ${r.side} | ${r.runs.map(cell).join(' | ')} | **${best(r).toFixed(0)}** |`),
    '',
    '| ratio (best vs best) | measured | target | |',
    '| --- | ---: | ---: | --- |',
    ...ratios.map(([name, value, target, ok]) => `| ${name} | **${value}** | ${target} | ${ok ? 'met' : 'MISSED'} |`),
  ]
  return lines.join('\n') + '\n'
}

const cell = (x: WrkResult) => `${x.rps.toFixed(0)} (${x.p99}${x.cpuMicros !== null ? `, ${x.cpuMicros.toFixed(1)} µs` : ''})`

function machineLine(mode: string): string {
  const cpu = cpus()
  return (
    `${new Date().toISOString()} · ${mode} run (${WARMUP_SECONDS}s warm-up + ${RUN_SECONDS}s measured per run) · ` +
    `${cpu.length} × ${cpu[0]?.model.trim() ?? 'cpu'} · Bun ${Bun.version} · wrk -t${WRK_THREADS} · data dir in ${tmpdir()}`
  )
}

// --- servers ---------------------------------------------------------------------------------

function start(name: string, cmd: string[], work: string, stdoutFile?: string): Subprocess {
  const proc = children.spawn(cmd, {
    cwd: ROOT,
    stdout: stdoutFile ? Bun.file(stdoutFile) : 'ignore',
    stderr: Bun.file(join(work, `${name}.stderr`)),
  })
  stderrFiles.set(proc, join(work, `${name}.stderr`))
  return proc
}

/** Polls /healthz until it answers 200; bounded, and fails fast if the server exits. */
function waitHealthy(name: string, proc: Subprocess, port: number, timeoutMs = 15_000): Promise<void> {
  return waitReady(name, proc, `http://127.0.0.1:${port}/healthz`, { timeoutMs, intervalMs: 100, log: () => tailOf(stderrFiles.get(proc)!) })
}

/** SIGTERM (keyward writes its snapshot and exits), SIGKILL after 5 s. */
function stopAll(): Promise<void> {
  return children.stopAll({ signal: 'SIGTERM', graceMs: 5000 })
}

// Ctrl-C: stop the servers before leaving.
onInterrupt(stopAll)

try {
  process.exitCode = await main()
} catch (error) {
  console.error(`bench/http.ts: ${(error as Error)?.message ?? error}`)
  process.exitCode = 1
}
