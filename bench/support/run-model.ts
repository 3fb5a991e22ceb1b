/**
 * What bench/run.ts measures and how (settings, targets) and what it records (the types, and each
 * measured outcome by phase, server kind and size), shared by the run and its report.
 */
import type { Subprocess } from 'bun'
import type { BuildMeta } from './dataset'
import type { WrkResult } from './wrk'
import type { SnapshotActivity } from './snapshots'

const args = process.argv.slice(2)
export const QUICK = args.includes('--quick')
export const MODE = QUICK ? 'quick' : 'full'
export const SMALLEST = 1_000
export const MID = 100_000
export const LARGEST = 1_000_000
export const SIZES = [SMALLEST, MID, LARGEST]
export const APPLICATIONS = 10
/** vendor + customer + applications: the rest are enrollments, consumers and installations, a third each. */
export const FIXED_RECORDS = 2 + APPLICATIONS
export const ROUNDS = QUICK ? 1 : 3
export const WARMUP_SECONDS = QUICK ? 1 : 2
export const RUN_SECONDS = QUICK ? 2 : 5
/** json-server's creates at the large sizes take seconds each: longer runs, but bounded. */
export const SLOW_RUN_CAP_SECONDS = QUICK ? 6 : 20
export const READ_CLIENTS = 64
export const PAGE_CLIENTS = 4
export const PAGE_SIZE = 25
export const CREATE_CLIENTS = [1, 64] as const
export const SNAPSHOT_CLIENTS = 16
/** Read load before SIGUSR1 and after the snapshot is done. */
export const SNAPSHOT_LEAD_SECONDS = 1
export const SNAPSHOT_BASELINE_SECONDS = QUICK ? 2 : 5
export const SNAPSHOT_TIMEOUT_SECONDS = 180
export const WRK_TIMEOUT_SECONDS = 30
export const START_TIMEOUT_MS = 120_000
/** Waiting for the servers to go quiet between runs (answering what wrk gave up on, collecting garbage). */
export const QUIET_TIMEOUT_MS = QUICK ? 5_000 : 15_000
/** A request that took longer than this in the checks gets no warm-up run: its cost is the work, not a cold JIT. */
export const NO_WARMUP_ABOVE_MS = 30
/** Other processes using more CPU than this (in cores) during a run: the run is marked as disturbed. */
export const DISTURBED_CORES = 0.25
export const JSON_SERVER_VERSION = '0.17.4'
export const JSON_SERVER_HEAP_MB = 8192

export const TARGETS = {
  readVsBare: 0.75,
  createVsJsonServer: 20,
  largeVsSmallRate: 0.8,
  pageLargeVsSmall: 2,
  startupSeconds: 3,
  bytesPerRecord: 1024,
  snapshotP999Ms: 100,
}

export const fmt = (n: number) => n.toLocaleString('en')
export const sizeLabel = (n: number) => (n >= 1_000_000 ? `${n / 1_000_000}M` : n >= 1000 ? `${n / 1000}k` : String(n))

// ---------------------------------------------------------------------------------------------
// Types

export type Kind = 'keyward' | 'json-server' | 'bare' | LadderKind
/** Steps from the bare server towards keyward (bench/ladder-server.ts): where a read's time goes. */
export type LadderKind = 'bare+header' | 'elysia'
export const LADDER: Record<LadderKind, string> = {
  'bare+header': 'Bun.serve that also reads the Authorization header and sends a fresh trace id (header and body)',
  elysia: "the same in an Elysia route, served by Elysia's listen, with no hooks or plugins",
}
export type Phase = 'read' | 'page' | 'create1' | 'create64'

export const PHASES: Record<Phase, { title: string; clients: number }> = {
  read: { title: 'Read by id', clients: READ_CLIENTS },
  page: { title: `Filtered page (${PAGE_SIZE} items)`, clients: PAGE_CLIENTS },
  create1: { title: 'Create, 1 client', clients: 1 },
  create64: { title: 'Create, 64 clients', clients: 64 },
}

export interface DataSet {
  readonly size: number
  readonly label: string
  readonly meta: BuildMeta
  /** keyward's data dir as built; every start of keyward runs on a fresh copy of it, `dir`. */
  readonly pristineDir: string
  readonly dir: string
  /** json-server's db.json as built; every start of json-server runs on a hard link of it (it never writes in place). */
  readonly pristineDb: string
  readonly customerId: string
  readonly applicationIds: string[]
  /** The enrollment read by id: the middle one (json-server scans its array up to it). */
  readonly readId: string
  /** The application of the filtered page. */
  readonly pageApp: string
  readonly appsFile: string
  /** Customer organization, role admin. */
  readonly token: string
}

export interface Server {
  readonly kind: Kind
  readonly name: string
  readonly set: DataSet | null
  port: number
  proc: Subprocess | null
  readonly logFile: string
  startupSeconds: number | null
  rssAtReady: number | null
  /** Could not start, or died: its runs are reported as not measured, with this reason. */
  failure: string | null
  /** After a create run: started again from the pristine data before its next run. */
  dirty: boolean
  /** VmRSS and VmHWM of its process at the end of its last run (or now, if it still runs). */
  memory: { rss: number; hwm: number } | null
  restarts: number
  /** Seconds one create took when checked (json-server: sizes the runs at large sizes). */
  checkCreateSeconds: number
  /** Milliseconds one read and one page took when checked (see NO_WARMUP_ABOVE_MS). */
  checkReadMs: number
  checkPageMs: number
}

export interface Run extends WrkResult {
  readonly cpuMicros: number | null
  readonly snapshots: SnapshotActivity | null
  /** CPU (in cores) used by processes other than the servers, wrk and the benchmark during the run. */
  readonly otherCores: number | null
  /** keyward creates: rows stored when the run started and when it ended. */
  readonly recordsAtStart: number | null
  readonly recordsAtEnd: number | null
}

export interface Outcome {
  readonly runs: Run[]
  readonly failures: string[]
}

export const outcomes = new Map<string, Outcome>()
export const outcomeKey = (phase: Phase, kind: Kind, size: number) => `${phase}/${kind}/${size}`
export const outcomeOf = (phase: Phase, kind: Kind, size: number): Outcome => {
  const key = outcomeKey(phase, kind, size)
  let outcome = outcomes.get(key)
  if (!outcome) outcomes.set(key, (outcome = { runs: [], failures: [] }))
  return outcome
}

export interface SnapshotPhase {
  readonly baseline: Run | null
  readonly during: WrkResult | null
  readonly duringOtherCores: number | null
  /** As the server logged it ("snapshot written in X s"). */
  readonly serverSeconds: number | null
  /** Temp file seen → snapshot.json replaced, from watching the dir. */
  readonly watchedSeconds: number | null
  /** SIGUSR1 → snapshot.json replaced. */
  readonly signalToDoneSeconds: number | null
  readonly covered: boolean
  readonly records: number | null
  readonly snapshotBytes: number | null
  readonly note: string | null
}

