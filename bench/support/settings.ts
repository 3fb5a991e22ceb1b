/**
 * What bench/run.ts measures and how: its command line, the data sets and timings of each store,
 * the targets, and the record of every measured run (by phase, side and size), shared by the run
 * and its report.
 */
import { parseArgs } from 'node:util'
import type { Subprocess } from 'bun'
import type { BuildMeta, CustomerPlan } from './dataset'
import type { ProcessLog } from './servers'
import type { SnapshotActivity } from './snapshots'
import type { Target } from './keyward'
import { DEFAULT_ADMIN_URL } from './postgres'
import type { WrkResult } from './wrk'

export type StoreName = 'embedded' | 'postgres'

/**
 * The phases, in the order they run (`--phase` picks some). Reads and pages come before anything
 * that writes, so that they see the data sets as built.
 *   read       read by id, beside the limit (a bare Bun.serve and the ladder; pgbench's select)
 *   page       the filtered page
 *   snapshot   reads while the embedded store writes a snapshot of the largest set
 *   create     enrollment creates (three rows each) from 1 and from 64 clients
 *   insert     organization creates (one row) from 64 clients beside pgbench's one-row insert
 *   instances  one and two keyward instances on one database, side by side
 */
export const PHASES = ['read', 'page', 'snapshot', 'create', 'insert', 'instances'] as const
export type PhaseName = (typeof PHASES)[number]
export const PHASES_OF: Record<StoreName, readonly PhaseName[]> = {
  embedded: ['read', 'page', 'snapshot', 'create', 'insert'],
  postgres: ['read', 'page', 'create', 'insert', 'instances'],
}

export interface Settings {
  readonly store: StoreName
  readonly quick: boolean
  readonly phases: readonly PhaseName[]
  /** Every phase of the store: only then is the report written to docs/. */
  readonly complete: boolean
  readonly rebuild: boolean
  /** The PostgreSQL server: databases are made and dropped through this URL. */
  readonly adminUrl: string
  /** Start keyward under `bun --cpu-prof`, profiles left here. */
  readonly profileDir: string | null
  /** Another checkout of keyward (its root dir), measured beside this one in the read and create phases (A/B). */
  readonly baseline: string | null
  /** `serve --rate-limit` for keyward (0: off). */
  readonly rateLimit: number
  /** Sizes of the data sets: records (embedded) or enrollments (postgres). */
  readonly sizes: readonly number[]
  readonly rounds: number
  readonly warmupSeconds: number
  readonly runSeconds: number
}

export const USAGE = `usage: npm run bench -- [--quick] [--store embedded|postgres] [--phase ${PHASES.join(',')}]
                         [--rebuild] [--database-url URL] [--profile DIR]
                         [--baseline DIR] [--sizes N,...] [--rate-limit N]
       npm run bench -- abuse|audit|load|crash-loop [their options: bench/tools/*.ts]

  --store         embedded (default; writes docs/benchmarks.md) or postgres (database mode;
                  writes docs/benchmarks-postgres.md)
  --phase         only these phases (comma-separated); the report is then printed, not written
  --rebuild       build the data sets again instead of taking them from bench/.cache
  --database-url  the PostgreSQL server, as a user that may create databases
                  (default ${DEFAULT_ADMIN_URL})
  --profile DIR   run keyward under bun --cpu-prof; profiles in DIR when it stops
  --baseline DIR  also run the keyward checked out in DIR (e.g. a worktree of main) on the same
                  data, measured in turn with this one in the read and create phases (embedded)
  --sizes N,...   only these data set sizes (of 1000, 100000, 1000000 embedded; 1000, 1000000
                  in database mode)
  --rate-limit N  run keyward with \`--rate-limit N\` (default 0: off), to measure the limits' cost`

/** The settings of a command line; throws a message for bad usage. */
export function parseSettings(argv: string[]): Settings {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      store: { type: 'string', default: 'embedded' },
      phase: { type: 'string' },
      rebuild: { type: 'boolean', default: false },
      'database-url': { type: 'string', default: DEFAULT_ADMIN_URL },
      profile: { type: 'string' },
      baseline: { type: 'string' },
      sizes: { type: 'string' },
      'rate-limit': { type: 'string', default: '0' },
    },
    strict: true,
    allowPositionals: false,
  })
  const store = values.store as StoreName
  if (store !== 'embedded' && store !== 'postgres') throw new Error(`--store must be embedded or postgres, not '${values.store}'`)
  const all = PHASES_OF[store]
  const asked = values.phase ? values.phase.split(',').map((p) => p.trim()) : [...all]
  for (const phase of asked) if (!all.includes(phase as PhaseName)) throw new Error(`--phase ${phase}: the ${store} store's phases are ${all.join(', ')}`)
  const quick = values.quick
  const allSizes = store === 'embedded' ? [1_000, 100_000, 1_000_000] : [1_000, 1_000_000]
  const sizes = values.sizes ? values.sizes.split(',').map((size) => Number(size.trim())) : allSizes
  for (const size of sizes) if (!allSizes.includes(size)) throw new Error(`--sizes ${size}: the ${store} store's sizes are ${allSizes.join(', ')}`)
  if (values.baseline && store !== 'embedded') throw new Error('--baseline runs on the embedded store only')
  const rateLimit = Number(values['rate-limit'])
  if (!Number.isSafeInteger(rateLimit) || rateLimit < 0) throw new Error(`--rate-limit must be a whole number, not '${values['rate-limit']}'`)
  return {
    store,
    quick,
    phases: all.filter((phase) => asked.includes(phase)),
    // Only a run of everything, without a baseline, writes the report into docs/.
    complete: all.every((phase) => asked.includes(phase)) && sizes.length === allSizes.length && !values.baseline,
    rebuild: values.rebuild,
    adminUrl: values['database-url'],
    profileDir: values.profile ?? null,
    baseline: values.baseline ?? null,
    rateLimit,
    sizes: allSizes.filter((size) => sizes.includes(size)),
    rounds: quick ? 1 : 3,
    warmupSeconds: quick ? 1 : 2,
    runSeconds: quick ? 2 : 5,
  }
}

export const APPLICATIONS = 10
/** Embedded sets count records: vendor + customer + applications, and a third each of enrollments, consumers, installations. */
export const FIXED_RECORDS = 2 + APPLICATIONS

/** One customer with APPLICATIONS applications and enrollments each with its own consumer and installation. */
/**
 * Database mode: the vendor's other customers, holding nothing. Not for their data: a table of two
 * organizations gets sequential scans in the plans keyward's connections prepare once and keep, which
 * stay while the table grows (docs/benchmarks-postgres.md); a vendor with a thousand customers is
 * also the more likely database.
 */
export const EMPTY_CUSTOMERS: Record<StoreName, number> = { embedded: 0, postgres: 1_000 }

export function customersOf(store: StoreName, size: number): CustomerPlan[] {
  const enrollments = store === 'embedded' ? Math.round((size - FIXED_RECORDS) / 3) : size
  return [{ description: 'Customer', applications: APPLICATIONS, enrollments, enrollmentsPerConsumer: 1, spareConsumerEvery: 0 }]
}

export const READ_CLIENTS = 64
export const PAGE_CLIENTS = 4
export const PAGE_SIZE = 25
export const CREATE_CLIENTS = [1, 64] as const
export const INSERT_CLIENTS = 64
export const SNAPSHOT_CLIENTS = 16
/** Read load before SIGUSR1 and after the snapshot is done. */
export const SNAPSHOT_LEAD_SECONDS = 1
export const SNAPSHOT_TIMEOUT_SECONDS = 180
/** json-server's creates at the large sizes take seconds each: longer runs, but bounded. */
export const slowRunCapSeconds = (s: Settings) => (s.quick ? 6 : 20)
export const snapshotBaselineSeconds = (s: Settings) => (s.quick ? 2 : 5)
/** Waiting for the servers to go quiet between runs (answering what wrk gave up on, collecting garbage). */
export const quietTimeoutMs = (s: Settings) => (s.quick ? 5_000 : 15_000)
export const WRK_TIMEOUT_SECONDS = 30
export const START_TIMEOUT_MS = 120_000
/** A request that took longer than this in the checks gets no warm-up run: its cost is the work, not a cold JIT. */
export const NO_WARMUP_ABOVE_MS = 30
/** Other processes using more CPU than this (in cores) during a run: the run is marked as disturbed. */
export const DISTURBED_CORES = 0.25
export const JSON_SERVER_VERSION = '0.17.4'
export const JSON_SERVER_HEAP_MB = 8192

export const TARGETS = {
  /** Server CPU per read by id, keyward ÷ the Elysia rung of the ladder (docs/performance.md). */
  readCpuVsElysia: 1.3,
  /** Durable one-row creates from 64 clients, keyward ÷ pgbench's one-row insert: embedded, database mode. */
  insertVsPgbench: { embedded: 2, postgres: 0.5 },
  /** Database mode: read by id ÷ pgbench's select by primary key. */
  readVsPgbench: 0.4,
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
// What is measured

/** Steps from the bare server towards keyward (bench/ladder-server.ts): where a read's time goes. */
export type LadderKind = 'bare+header' | 'elysia'
export const LADDER: Record<LadderKind, string> = {
  'bare+header': 'Bun.serve that also reads the Authorization header and sends a fresh trace id (header and body)',
  elysia: "the same in an Elysia route, served by Elysia's listen, with no hooks or plugins",
}
/**
 * A side of a comparison. `keyward×2`: two instances on one database, the load spread over both.
 * `baseline`: the keyward of `--baseline DIR` on the same data (an A/B of two versions).
 * `pgbench`: the database's limit for the request; `pgbench: keyward`: the statements keyward sends
 * for it, run by pgbench (bench/pgbench/), the database's limit for keyward's way of asking.
 */
export type Kind = 'keyward' | 'keyward×2' | 'baseline' | 'json-server' | 'bare' | LadderKind | 'pgbench' | 'pgbench: keyward'
/** What a run measured: `insert64` is the one-row create; `instances-*` the runs of the instances phase. */
export type Measure = 'read' | 'page' | 'create1' | 'create64' | 'insert64' | 'instances-read' | 'instances-insert64'

export const MEASURES: Record<Measure, { title: string; clients: number }> = {
  read: { title: 'Read by id', clients: READ_CLIENTS },
  page: { title: `Filtered page (${PAGE_SIZE} items)`, clients: PAGE_CLIENTS },
  create1: { title: 'Create, 1 client', clients: 1 },
  create64: { title: 'Create, 64 clients', clients: 64 },
  insert64: { title: 'One-row create, 64 clients, beside pgbench', clients: INSERT_CLIENTS },
  'instances-read': { title: 'Read by id, one and two instances', clients: READ_CLIENTS },
  'instances-insert64': { title: 'One-row create, one and two instances', clients: INSERT_CLIENTS },
}

export interface DataSet {
  readonly size: number
  readonly label: string
  readonly meta: BuildMeta
  /** As built (cached): never served. */
  readonly pristine: Target
  /** What keyward serves: a fresh copy of the pristine data (a data dir copied before every start, a database made from it). */
  readonly working: Target
  /** PostgreSQL: the working database's name (dropped at the end). */
  readonly database: string | null
  /** json-server's db.json as built; every start of json-server runs on a hard link of it (it never writes in place). */
  readonly pristineDb: string | null
  readonly customerId: string
  readonly applicationIds: string[]
  /** The enrollment read by id: the middle one (json-server scans its array up to it). */
  readonly readId: string
  /** The application of the filtered page. */
  readonly pageApp: string
  /** The customer's applications, one a line, for bench/run-create.lua. */
  readonly appsFile: string
  /** Customer organization, role admin. */
  readonly token: string
  /** Vendor organization, role admin (it creates customers). */
  readonly vendorToken: string
}

export interface Server {
  readonly kind: Kind
  readonly name: string
  readonly set: DataSet | null
  port: number
  proc: Subprocess | null
  log: ProcessLog | null
  /** The first start: spawn until it answers. */
  startupSeconds: number | null
  /** Every start (restarts too): wall time and the CPU time used until ready (keyward). */
  readonly startups: { seconds: number; cpuSeconds: number | null }[]
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

/** One measured run: the load generator's figures and the CPU around it. */
export interface Run extends Omit<WrkResult, 'output'> {
  /** keyward's (or the server's) CPU per request, µs; null for pgbench. */
  readonly cpuMicros: number | null
  /** PostgreSQL's CPU per request, µs (all its processes), where the run used it. */
  readonly databaseMicros: number | null
  /** CPU (in cores) used by processes other than ours (servers, load generator, database, this benchmark). */
  readonly otherCores: number | null
  readonly snapshots: SnapshotActivity | null
  /** keyward creates on the embedded store: rows stored when the run started and when it ended. */
  readonly recordsAtStart: number | null
  readonly recordsAtEnd: number | null
}

export interface Outcome {
  readonly runs: Run[]
  readonly failures: string[]
}

/** Every run of the benchmark, by what it measured, on which side, at which size. */
export class Outcomes {
  private readonly byKey = new Map<string, Outcome>()

  of(measure: Measure, kind: Kind, size: number): Outcome {
    const key = `${measure}/${kind}/${size}`
    let outcome = this.byKey.get(key)
    if (!outcome) this.byKey.set(key, (outcome = { runs: [], failures: [] }))
    return outcome
  }

  entries(): [string, Outcome][] {
    return [...this.byKey.entries()]
  }

  /** The best run: the highest rate, or (pages) the lowest mean latency. */
  best(measure: Measure, kind: Kind, size: number): Run | null {
    const runs = this.of(measure, kind, size).runs.filter((r) => r.requests > 0)
    if (runs.length === 0) return null
    return runs.reduce((a, b) => (measure === 'page' ? (b.meanMs < a.meanMs ? b : a) : b.rps > a.rps ? b : a))
  }

  /** The lowest server CPU per request of the runs (the least disturbed). */
  lowestCpu(measure: Measure, kind: Kind, size: number, field: 'cpuMicros' | 'databaseMicros' = 'cpuMicros'): number | null {
    const values = this.of(measure, kind, size).runs.map((r) => r[field]).filter((v): v is number => v !== null && Number.isFinite(v))
    return values.length ? Math.min(...values) : null
  }
}

export interface SnapshotPhase {
  readonly baseline: Run | null
  readonly during: Run | null
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
