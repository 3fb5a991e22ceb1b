/**
 * One measured run: a load (wrk, pgbench, or several wrk at once) with the CPU time of everyone
 * involved around it, so that a run reports the server's CPU per request (steadier than req/s on
 * a shared machine), the database's where it took part, and how much CPU the rest of the machine
 * used meanwhile (the noise of other sessions).
 */
import type { Subprocess } from 'bun'
import { cpuSeconds, machineBusySeconds, meterCpu, ownCpuSeconds, waitQuiet } from './system'
import { startWrk, type WrkOptions, type WrkResult } from './wrk'
import { databaseProcesses, startPgbench } from './postgres'
import { watchSnapshots } from './snapshots'
import { firstLine, running } from './servers'
import { DISTURBED_CORES, fmt, type Outcome, type Run } from './settings'
import { formatMs } from './wrk'

/** What a load generator reports at the end of a run (wrk's figures; pgbench gives the same shape). */
export type LoadResult = Omit<WrkResult, 'output'>

/** A load generator running. */
export interface Load {
  readonly procs: Subprocess[]
  /** Ends the run now (the generators still report what they measured). */
  stop(): void
  readonly result: Promise<LoadResult>
}

export function wrkLoad(wrk: string, args: readonly string[], options: WrkOptions): Load {
  const run = startWrk(wrk, args, options)
  return { procs: [run.proc], stop: run.stop, result: run.result }
}

export function pgbenchLoad(pgbench: string, url: string, options: Parameters<typeof startPgbench>[2]): Load {
  const run = startPgbench(pgbench, url, options)
  return { procs: [run.proc], stop: () => run.proc.kill('SIGINT'), result: run.result }
}

/**
 * Several loads at once (one per keyward instance) as one: rates and counts add up; the mean is
 * weighted by requests; p99, p99.9 and max are the highest of the parts (an upper bound).
 */
export function spreadLoad(loads: Load[]): Load {
  const result = Promise.all(loads.map((l) => l.result)).then((parts): LoadResult => {
    const sum = (f: (r: LoadResult) => number) => parts.reduce((a, r) => a + f(r), 0)
    const requests = sum((r) => r.requests)
    return {
      seconds: Math.max(...parts.map((r) => r.seconds)),
      rps: sum((r) => r.rps),
      requests,
      meanMs: requests > 0 ? sum((r) => r.meanMs * r.requests) / requests : NaN,
      p99Ms: Math.max(...parts.map((r) => r.p99Ms)),
      p999Ms: Math.max(...parts.map((r) => r.p999Ms)),
      maxMs: Math.max(...parts.map((r) => r.maxMs)),
      non2xx: sum((r) => r.non2xx),
      timeouts: sum((r) => r.timeouts),
      socketErrors: sum((r) => r.socketErrors),
    }
  })
  return { procs: loads.flatMap((l) => l.procs), stop: () => loads.forEach((l) => l.stop()), result }
}

export interface Accounting {
  /** The server(s) the requests went to: their CPU is divided by the requests. */
  readonly serverPids: readonly number[]
  /** Every process of the benchmark that is not the load or the database (all servers, builders). */
  readonly ourPids: readonly number[]
  /**
   * The databases the run used on the PostgreSQL server of `adminUrl` (none: it used none): their
   * processes' CPU is ours, and divided by the requests too.
   */
  readonly database: { readonly adminUrl: string; readonly names: readonly string[] } | null
}

/**
 * Starts `load` and waits for it, with the CPU around it: the servers' and the database's per
 * request, and the CPU everything else on the machine used meanwhile (the machine's busy time less
 * ours, the load generator's, the database's).
 */
export async function measuredRun(start: () => Load, accounting: Accounting): Promise<Run & { otherCores: number | null }> {
  const cpuOf = async (pids: readonly number[]) => {
    let sum = 0
    for (const pid of pids) sum += (await cpuSeconds(pid)) ?? 0
    return sum
  }
  const ours = async () => ownCpuSeconds() + (await cpuOf(accounting.ourPids))
  const processes = accounting.database ? databaseProcesses(accounting.database.adminUrl, accounting.database.names) : null
  const database = processes ? meterCpu(() => processes.pids()) : null
  await database?.ready
  const [machineBefore, oursBefore, serverBefore] = [await machineBusySeconds(), await ours(), await cpuOf(accounting.serverPids)]
  const begun = performance.now()
  const load = start()
  const generator = meterCpu(() => load.procs.map((p) => p.pid), { rescanMs: 1e9 })
  try {
    const result = await load.result
    const seconds = (performance.now() - begun) / 1000
    const [loadCpu, databaseCpu] = [await generator.stop(), (await database?.stop()) ?? null]
    const [machineAfter, oursAfter, serverAfter] = [await machineBusySeconds(), await ours(), await cpuOf(accounting.serverPids)]
    const perRequest = (cpu: number) => (result.requests > 0 ? (cpu / result.requests) * 1e6 : null)
    const otherCores =
      machineBefore !== null && machineAfter !== null
        ? Math.max(0, (machineAfter - machineBefore - (oursAfter - oursBefore) - loadCpu - (databaseCpu ?? 0)) / seconds)
        : null
    return {
      ...result,
      cpuMicros: accounting.serverPids.length > 0 ? perRequest(serverAfter - serverBefore) : null,
      databaseMicros: databaseCpu === null ? null : perRequest(databaseCpu),
      otherCores,
      snapshots: null,
      recordsAtStart: null,
      recordsAtEnd: null,
    }
  } finally {
    await generator.stop()
    await database?.stop()
    await processes?.close()
  }
}

export interface RunSpec {
  /** For the console. */
  readonly label: string
  readonly outcome: Outcome
  /** A new load for `seconds` (a warm-up when `warmup`). */
  readonly load: (seconds: number, warmup: boolean) => Load
  readonly warmupSeconds: number
  readonly seconds: number
  readonly accounting: () => Accounting
  /** The embedded store's data dir: watched for snapshots during the run. */
  readonly dataDir?: string | null
  /** Rows stored before and after the run (keyward creates). */
  readonly records?: () => Promise<number | null>
  /** Waits until the machine is quiet enough to measure. */
  readonly settle: (when: string) => Promise<void>
}

/**
 * Waits for quiet, warms up (discarded), then measures one run into `spec.outcome`. A failure is
 * recorded (the run reported as not measured), not thrown: the other measurements still count.
 */
export async function measureRun(spec: RunSpec): Promise<Run | null> {
  const label = spec.label.padEnd(34)
  try {
    await spec.settle(`before ${spec.label}`)
    if (spec.warmupSeconds > 0) {
      const warm = spec.load(spec.warmupSeconds, true)
      await warm.result
      await spec.settle(`after the warm-up of ${spec.label}`)
    }
    const recordsAtStart = spec.records ? await spec.records() : null
    const watch = spec.dataDir ? watchSnapshots(spec.dataDir) : null
    const measured = await measuredRun(() => spec.load(spec.seconds, false), spec.accounting()).finally(() => watch?.stop())
    const snapshots = watch ? await watch.stop() : null
    const recordsAtEnd = spec.records ? await spec.records() : null
    const run: Run = { ...measured, snapshots, recordsAtStart, recordsAtEnd }
    spec.outcome.runs.push(run)
    console.log(`  ${label} ${describeRun(run)}`)
    return run
  } catch (error) {
    const message = firstLine((error as Error)?.message ?? String(error))
    spec.outcome.failures.push(message)
    console.log(`  ${label} not measured: ${message}`)
    return null
  }
}

export function describeRun(r: Run): string {
  return (
    `${r.rps.toFixed(r.rps < 100 ? 2 : 0).padStart(9)} req/s  mean ${formatMs(r.meanMs).padEnd(9)} p99 ${formatMs(r.p99Ms).padEnd(9)}` +
    (r.cpuMicros !== null ? ` CPU ${r.cpuMicros.toFixed(r.cpuMicros < 100 ? 1 : 0)} µs/req` : '') +
    (r.databaseMicros !== null ? ` database ${r.databaseMicros.toFixed(r.databaseMicros < 100 ? 1 : 0)} µs/req` : '') +
    (r.non2xx > 0 ? `  ${r.non2xx} non-2xx` : '') +
    (r.timeouts > 0 ? `  ${r.timeouts} timeouts` : '') +
    (r.socketErrors > 0 ? `  ${r.socketErrors} socket errors` : '') +
    (r.snapshots?.busy ? `  (snapshot: ${r.snapshots.started} started, ${r.snapshots.finished} finished)` : '') +
    (r.otherCores !== null && r.otherCores >= DISTURBED_CORES ? `  (other load: ${r.otherCores.toFixed(2)} cores)` : '') +
    (r.recordsAtStart !== null ? `  (records ${fmt(r.recordsAtStart)} → ${r.recordsAtEnd === null ? '?' : fmt(r.recordsAtEnd)})` : '')
  )
}

/** Waits until `pids` are quiet (see waitQuiet); says so when they were not within `timeoutMs`. */
export async function settle(pids: number[], when: string, timeoutMs: number): Promise<void> {
  const { quiet, seconds } = await waitQuiet(pids, { timeoutMs })
  if (!quiet) console.log(`    (${when}: still busy after ${seconds.toFixed(1)} s; going on)`)
}

export const livePids = (procs: (Subprocess | null)[]) => procs.filter(running).map((p) => p.pid)
