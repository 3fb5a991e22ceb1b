/**
 * The report bench/run.ts writes: docs/benchmarks.md for the embedded store (targets, data sets,
 * start-up and memory, every phase, the read ladder, reads during a snapshot) with its chart,
 * docs/benchmarks.svg; docs/benchmarks-postgres.md for database mode (targets, data sets, every
 * phase beside pgbench, one and two instances).
 */
import {
  APPLICATIONS,
  DISTURBED_CORES,
  EMPTY_CUSTOMERS,
  FIXED_RECORDS,
  fmt,
  INSERT_CLIENTS,
  JSON_SERVER_HEAP_MB,
  JSON_SERVER_VERSION,
  LADDER,
  MEASURES,
  NO_WARMUP_ABOVE_MS,
  PAGE_CLIENTS,
  PAGE_SIZE,
  quietTimeoutMs,
  READ_CLIENTS,
  sizeLabel,
  slowRunCapSeconds,
  SNAPSHOT_CLIENTS,
  SNAPSHOT_LEAD_SECONDS,
  TARGETS,
  WRK_TIMEOUT_SECONDS,
  type DataSet,
  type Kind,
  type LadderKind,
  type Measure,
  type Outcomes,
  type Run,
  type Server,
  type Settings,
  type SnapshotPhase,
} from './settings'
import { ENVIRONMENT } from './dataset'
import { machineDescription, mib } from './system'
import { formatMs, WRK_THREADS } from './wrk'
import { lineChartSvg, type Series } from './chart'
import { nodeVersion } from './json-server'

export const rate = (rps: number | null) => (rps === null ? '–' : rps >= 100 ? fmt(Math.round(rps)) : rps.toFixed(2))
export const cpu = (micros: number | null) => (micros === null ? '–' : micros >= 1000 ? `${fmt(Math.round(micros))} µs` : `${micros.toFixed(1)} µs`)
export const pct = (ratio: number) => `${(ratio * 100).toFixed(0)}%`
export const times = (ratio: number) => (ratio >= 100 ? `${fmt(Math.round(ratio))}×` : `${ratio.toFixed(2)}×`)

/** What the run knows about where it ran. */
export interface Environment {
  readonly busy: string | null
  readonly wallSeconds: number
  /** How keyward's rate limits were set (bench/support/keyward.ts). */
  readonly serveNote: string
  /** Size on the wire and of the body of keyward's answer to the read, which the bare server repeats. */
  readonly bareBytes: number
  readonly bareBodyBytes: number
  /** The PostgreSQL server and its durability settings, where the run used it. */
  readonly postgres: string | null
}

export interface ReportInput {
  readonly sets: DataSet[]
  readonly servers: Server[]
  readonly outcomes: Outcomes
  readonly snapshot: SnapshotPhase | null
  readonly environment: Environment
}

interface TargetRow {
  readonly name: string
  readonly value: string
  readonly goal: string
  readonly ok: boolean | null
  readonly cpu: string
  readonly runs: (Run | null)[]
}

/** Writes the report of a run; `failed` when a keyward measurement failed. */
export function report(settings: Settings, input: ReportInput): { markdown: string; failed: boolean } {
  const L: string[] = []
  const { outcomes, environment: env } = input
  const embedded = settings.store === 'embedded'
  const smallest = settings.sizes[0]!
  const largest = settings.sizes.at(-1)!
  const ran = (measure: Measure) => outcomes.entries().some(([key, o]) => key.startsWith(`${measure}/`) && o.runs.length + o.failures.length > 0)

  L.push(embedded ? '# keyward benchmarks' : '# keyward benchmarks: database mode', '')
  const flags = [...(settings.quick ? ['--quick'] : []), ...(embedded ? [] : ['--store postgres'])]
  L.push(
    `${new Date().toISOString()} · ${settings.quick ? 'quick' : 'full'} run (\`npm run bench${flags.length ? ` -- ${flags.join(' ')}` : ''}\`; ` +
      `${settings.rounds} round${settings.rounds > 1 ? 's' : ''}, ${settings.warmupSeconds}s warm-up + ${settings.runSeconds}s measured per run, best run of each side kept) · ` +
      `${machineDescription()} · wrk -t${WRK_THREADS}${embedded ? ` · Node ${nodeVersion()} · json-server ${JSON_SERVER_VERSION}` : ''}` +
      `${env.postgres ? ` · ${env.postgres}` : ''}${env.busy ? ` · CPU busy before start: ${env.busy}` : ''} · ${fmt(Math.round(env.wallSeconds))} s in all`,
  )
  L.push(
    '',
    `Written by \`bench/run.ts\`${embedded ? '' : ' --store postgres'} on every full run: do not edit by hand. All figures are from this one run on this ` +
      `machine; the ratios compare sides measured in turn within it, so that the noise of a shared machine hits them alike. keyward runs ` +
      `with ${env.serveNote}.`,
    '',
  )

  const rows = embedded ? embeddedTargets(settings, input) : postgresTargets(settings, input)
  const disturbed = (r: TargetRow) => {
    const worst = Math.max(0, ...r.runs.map((run) => run?.otherCores ?? 0))
    return worst >= DISTURBED_CORES ? ` ⚠ other load during a compared run (up to ${worst.toFixed(2)} cores)` : ''
  }
  L.push('## Targets', '')
  L.push(`${rows.filter((r) => r.ok === true).length} of ${rows.length} met.`, '')
  L.push('| target | measured | goal | | CPU per request |', '| --- | --- | --- | --- | --- |')
  for (const r of rows) L.push(`| ${r.name} | ${r.value}${disturbed(r)} | ${r.goal} | ${r.ok === null ? 'not measured' : r.ok ? 'met' : '**MISSED**'} | ${r.cpu} |`)
  L.push('')

  dataSetsSection(L, settings, input)
  if (embedded) startupSection(L, settings, input)

  const sizeCell = (kind: Kind, size: number) => {
    const set = input.sets.find((s) => s.size === size)!
    if (kind === 'bare' || kind in LADDER) return `(${sizeLabel(size)})`
    return embedded ? fmt(set.meta.records) : `${fmt(set.meta.customers[0]!.enrollments)} enrollments`
  }
  const phaseTable = (measure: Measure, kinds: Kind[], intro: string, sizes: readonly number[] = settings.sizes) => {
    if (!ran(measure)) return
    L.push(`## ${MEASURES[measure].title}`, '', intro, '')
    L.push(
      '| data | side | req/s (best) | mean | p99 | p99.9 | server CPU per request | database CPU per request | non-2xx / timeouts | every run: req/s |',
      '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    )
    for (const size of sizes) {
      for (const kind of kinds) {
        const outcome = outcomes.of(measure, kind, size)
        if (outcome.runs.length === 0 && outcome.failures.length === 0) continue
        const b = outcomes.best(measure, kind, size)
        const failures = outcome.failures.length ? ` not measured: ${[...new Set(outcome.failures)].join('; ')}` : ''
        const bad = outcome.runs.reduce((sum, r) => sum + r.non2xx, 0)
        const timeouts = outcome.runs.reduce((sum, r) => sum + r.timeouts, 0)
        const notes = (r: Run) =>
          [
            r.snapshots?.busy ? 'snapshot' : '',
            r.recordsAtStart !== null ? `records ${fmt(r.recordsAtStart)} → ${r.recordsAtEnd === null ? '?' : fmt(r.recordsAtEnd)}` : '',
            r.requests === 0 ? 'no answer in the run' : '',
            r.otherCores !== null && r.otherCores >= DISTURBED_CORES ? `other load ${r.otherCores.toFixed(2)} cores` : '',
          ].filter(Boolean)
        const every = outcome.runs.map((r) => `${rate(r.rps)}${notes(r).length ? ` (${notes(r).join(', ')})` : ''}`).join('; ')
        L.push(
          `| ${sizeCell(kind, size)} | ${kindLabel(kind)} | ${b ? `**${rate(b.rps)}**` : '–'} | ${b ? formatMs(b.meanMs) : '–'} | ${b ? formatMs(b.p99Ms) : '–'} | ` +
            `${b ? formatMs(b.p999Ms) : '–'} | ${cpu(outcomes.lowestCpu(measure, kind, size))} | ${cpu(outcomes.lowestCpu(measure, kind, size, 'databaseMicros'))} | ` +
            `${bad} / ${timeouts} | ${every}${failures} |`,
        )
      }
    }
    L.push('')
  }

  if (embedded) {
    phaseTable(
      'read',
      ['keyward', 'baseline', 'json-server', 'bare'],
      `keyward: \`GET /api/enrollments/{id}\` with a token of the customer organization, role admin; json-server: \`GET /enrollments/{id}\`; ` +
        `bare Bun.serve: keyward's own answer to that request (${env.bareBytes} bytes on the wire, body ${env.bareBodyBytes} bytes; the same status, ` +
        `headers and body, checked byte for byte with the Date and trace id masked), from bench/ladder-server.ts. One fixed enrollment, ` +
        `the middle one of the data set (json-server searches its array up to it). ${READ_CLIENTS} connections. The bare server does not ` +
        `depend on the data set; it was run beside each size.`,
    )
    if (ran('read')) ladderTable(L, input, smallest)
    phaseTable(
      'page',
      ['keyward', 'json-server'],
      `keyward: \`GET /api/enrollments?application_ids=X&page=1&page_size=${PAGE_SIZE}\`; json-server: ` +
        `\`GET /enrollments?application_id=X&_page=1&_limit=${PAGE_SIZE}\`; X is the first of the ${APPLICATIONS} applications ` +
        `(a tenth of the enrollments), so the page is always full. ${PAGE_CLIENTS} connections; the best run is the one with the lowest mean latency.`,
    )
    for (const measure of ['create1', 'create64'] as Measure[]) {
      phaseTable(
        measure,
        ['keyward', 'baseline', 'json-server'],
        `keyward: \`POST /api/enrollments\` with fresh enrollment, consumer and installation ids per request (the server creates all three ` +
          `in one transaction, fsynced to its write-ahead log before the 201); json-server: \`POST /enrollments\` with the same body plus ` +
          `\`id\`. ${MEASURES[measure].clients} connection${MEASURES[measure].clients > 1 ? 's' : ''} (bench/run-create.lua). **json-server does not ` +
          `fsync**: it answers 201 once it has serialised its whole database (JSON.stringify of every collection, for every write) and ` +
          `writes the file afterwards, asynchronously, to a temp file renamed over db.json, without fsync. Its runs have no warm-up ` +
          `(every write would have to be undone; its reads warmed it up) and are longer at the sizes where one write takes seconds ` +
          `(at most ${slowRunCapSeconds(settings)} s); after each run it is stopped at once (it still has the writes wrk gave up on queued). ` +
          `Every create run of either server starts from the pristine data set: after a create run the server is started again on a ` +
          `fresh copy before its next run. Each create adds three rows to keyward (enrollment, consumer, installation), one to ` +
          `json-server; keyward's rows at the start and end of each run are shown (its warm-up, with one connection, comes ` +
          `first): a create run necessarily grows the data set, many times over at the smallest size.`,
      )
    }
  } else {
    phaseTable(
      'read',
      ['keyward', 'pgbench: keyward', 'pgbench'],
      `keyward: \`GET /api/enrollments/{id}\` with a token of the customer organization, role admin, ${READ_CLIENTS} connections; ` +
        `pgbench: \`SELECT * FROM enrollments WHERE enrollment_id = :id\` on the same database, the same enrollment, ${READ_CLIENTS} ` +
        `clients, prepared statements (\`pgbench -M prepared -f\`): the database's own limit for a read by primary key. Between ` +
        `them, "pgbench: keyward" runs the statements keyward sends for this read (bench/pgbench/read-as-keyward.sql: the enrollment with its ` +
        `application, one round trip; the token's credential is remembered, confirmed by reads of the credential generation that each ` +
        `serve many requests, left out): the database's limit for keyward's way of asking, so ` +
        `that the rest of the gap is keyward's own time (its CPU per request, beside the database's).`,
    )
    phaseTable(
      'page',
      ['keyward'],
      `\`GET /api/enrollments?application_ids=X&page=1&page_size=${PAGE_SIZE}\`; X is the first of the ${APPLICATIONS} applications ` +
        `(a tenth of the enrollments: its \`total\` is that many, the sum of the application's enrollment counters, docs/storage.md "Lists"), so the page is always full. ${PAGE_CLIENTS} connections; ` +
        `the best run is the one with the lowest mean latency.`,
    )
    for (const measure of ['create1', 'create64'] as Measure[]) {
      phaseTable(
        measure,
        ['keyward'],
        `\`POST /api/enrollments\` with fresh enrollment, consumer and installation ids per request: the server creates all three in ` +
          `one transaction, committed before the 201. ${MEASURES[measure].clients} connection${MEASURES[measure].clients > 1 ? 's' : ''} ` +
          `(bench/run-create.lua). The runs add their rows to the working copy of the data set (nothing restarts in database mode).`,
      )
    }
  }
  phaseTable(
    'insert64',
    ['keyward', 'pgbench: keyward', 'pgbench'],
    `keyward: \`POST /api/organizations\` (a new customer of the vendor, one row), ${INSERT_CLIENTS} connections, as the vendor's admin; ` +
      `pgbench: \`INSERT INTO bench_organizations ... VALUES (gen_random_uuid(), ...)\`, one row per transaction, ${INSERT_CLIENTS} clients, ` +
      `prepared, into a table made \`LIKE organizations INCLUDING ALL\` (keyward's own table shape, indexes included), ` +
      (embedded
        ? 'in a database of its own on the local PostgreSQL (its schema made by `keyward init --database-url`). Both durable: keyward fsyncs its log, PostgreSQL its WAL, before answering.'
        : `in the same database keyward uses (the ${sizeLabel(largest)} set's). Both committed before they answer. Between them, ` +
          `"pgbench: keyward" runs the statements keyward sends for this create (bench/pgbench/insert-as-keyward.sql: BEGIN with the ` +
          `insert, the parent (the vendor itself) not read; its audit event with COMMIT: four statements in two round trips, pipelined as ` +
          `keyward sends them; the token's credential is remembered, as for the read).`),
    embedded ? [smallest] : [largest],
  )
  if (!embedded) {
    for (const measure of ['instances-read', 'instances-insert64'] as Measure[]) {
      phaseTable(
        measure,
        ['keyward', 'keyward×2'],
        `${measure === 'instances-read' ? `\`GET /api/enrollments/{id}\`` : '`POST /api/organizations`'} from ${MEASURES[measure].clients} connections in two wrk ` +
          `processes of ${MEASURES[measure].clients / 2}: both to one instance ("keyward"), or one to each of two \`serve\` processes on the ` +
          `same database ("keyward×2"), so that both sides have the same load generators. Server CPU is both instances' per request.`,
        [largest],
      )
    }
  }
  if (embedded && input.snapshot) snapshotSection(L, input.snapshot, input.sets)

  if (embedded) L.push('## Throughput against data size', '', '![Throughput in requests per second against records, log scales, per server and phase](benchmarks.svg)', '')
  notesSection(L, settings, input)

  const failed = outcomes.entries().some(([key, o]) => key.includes('/keyward') && o.failures.length > 0)
  return { markdown: L.join('\n'), failed }
}

const KIND_LABELS: Partial<Record<Kind, string>> = {
  bare: 'bare Bun.serve',
  'keyward×2': 'keyward, two instances',
  baseline: 'keyward of --baseline',
  'pgbench: keyward': "pgbench running keyward's statements",
}
const kindLabel = (kind: Kind) => KIND_LABELS[kind] ?? kind

function cpuPair(a: number | null, b: number | null, names: [string, string]): string {
  return a === null || b === null ? '–' : `${names[0]} ${cpu(a)} vs ${names[1]} ${cpu(b)} (${a / b >= 0.1 ? times(a / b) : `÷${fmt(Math.round(b / a))}`})`
}

function embeddedTargets(settings: Settings, input: ReportInput): TargetRow[] {
  const { outcomes, servers, sets, snapshot } = input
  // With fewer than three sizes (`--sizes`), the middle one is the largest asked.
  const [smallest, mid, largest] = [settings.sizes[0]!, settings.sizes[1] ?? settings.sizes.at(-1)!, settings.sizes.at(-1)!]
  const rows: TargetRow[] = []

  const keywardCpu = outcomes.lowestCpu('read', 'keyward', smallest)
  const elysiaCpu = outcomes.lowestCpu('read', 'elysia', smallest)
  rows.push({
    name: `Authenticated read by id at ${fmt(smallest)} records: keyward's server CPU per request ÷ the Elysia route of the ladder (below)`,
    value: keywardCpu === null || elysiaCpu === null ? 'not measured' : `**${times(keywardCpu / elysiaCpu)}** (${cpu(keywardCpu)} vs ${cpu(elysiaCpu)})`,
    goal: `≤ ${TARGETS.readCpuVsElysia}×`,
    ok: keywardCpu === null || elysiaCpu === null ? null : keywardCpu / elysiaCpu <= TARGETS.readCpuVsElysia,
    cpu: cpuPair(keywardCpu, elysiaCpu, ['keyward', 'Elysia route']),
    runs: [outcomes.best('read', 'keyward', smallest), outcomes.best('read', 'elysia', smallest)],
  })

  const bareRun = settings.sizes.map((size) => outcomes.best('read', 'bare', size)).reduce<Run | null>((a, b) => (b && (!a || b.rps > a.rps) ? b : a), null)
  const readRatios = settings.sizes.map((size) => {
    const k = outcomes.best('read', 'keyward', size)
    return k && bareRun ? k.rps / bareRun.rps : null
  })
  const measured = readRatios.filter((r): r is number => r !== null)
  const readWorst = measured.length === settings.sizes.length ? Math.min(...measured) : null
  const worstSize = readWorst === null ? smallest : settings.sizes[readRatios.indexOf(readWorst)]!
  rows.push({
    name: 'Authenticated read by id: keyward\'s rate ÷ bare Bun.serve\'s (the worst of the three sizes; bare: its best run)',
    value: readWorst === null ? 'not measured' : `**${pct(readWorst)}** (${settings.sizes.map((size, i) => `${sizeLabel(size)} ${readRatios[i] === null ? '–' : pct(readRatios[i]!)}`).join(', ')})`,
    goal: '≥ 75%',
    ok: readWorst === null ? null : readWorst >= 0.75,
    cpu: cpuPair(
      outcomes.lowestCpu('read', 'keyward', worstSize),
      Math.min(...settings.sizes.map((size) => outcomes.lowestCpu('read', 'bare', size) ?? Infinity)),
      [`keyward ${sizeLabel(worstSize)}`, 'bare'],
    ),
    runs: [outcomes.best('read', 'keyward', worstSize), bareRun],
  })

  const kInsert = outcomes.best('insert64', 'keyward', smallest)
  const pInsert = outcomes.best('insert64', 'pgbench', smallest)
  rows.push({
    name: `Durable one-row create, ${INSERT_CLIENTS} clients: keyward (\`POST /api/organizations\`) ÷ pgbench's one-row insert on the local PostgreSQL`,
    value: kInsert && pInsert ? `**${times(kInsert.rps / pInsert.rps)}** (${rate(kInsert.rps)} vs ${rate(pInsert.rps)} req/s)` : 'not measured',
    goal: `≥ ${TARGETS.insertVsPgbench.embedded}×`,
    ok: kInsert && pInsert ? kInsert.rps / pInsert.rps >= TARGETS.insertVsPgbench.embedded : null,
    cpu: cpuPair(outcomes.lowestCpu('insert64', 'keyward', smallest), outcomes.lowestCpu('insert64', 'pgbench', smallest, 'databaseMicros'), ['keyward', 'PostgreSQL']),
    runs: [kInsert, pInsert],
  })

  const kCreate = outcomes.best('create64', 'keyward', mid)
  const jCreate = outcomes.best('create64', 'json-server', mid)
  const noJsonCreate = kCreate !== null && outcomes.of('create64', 'json-server', mid).runs.length > 0 && !jCreate
  rows.push({
    name: `Durable create, 64 clients, at ${fmt(mid)} records: keyward ÷ json-server (which does not fsync)`,
    value:
      kCreate && jCreate
        ? `**${times(kCreate.rps / jCreate.rps)}** (${rate(kCreate.rps)} vs ${rate(jCreate.rps)} req/s)`
        : noJsonCreate
          ? `json-server completed no create in its run (keyward ${rate(kCreate!.rps)} req/s)`
          : 'not measured',
    goal: `≥ ${TARGETS.createVsJsonServer}×`,
    ok: kCreate && jCreate ? kCreate.rps / jCreate.rps >= TARGETS.createVsJsonServer : noJsonCreate ? true : null,
    cpu: cpuPair(outcomes.lowestCpu('create64', 'keyward', mid), outcomes.lowestCpu('create64', 'json-server', mid), ['keyward', 'json-server']),
    runs: [kCreate, jCreate],
  })

  for (const [measure, name] of [
    ['read', 'Read by id'],
    ['create1', 'Create, 1 client'],
    ['create64', 'Create, 64 clients'],
  ] as [Measure, string][]) {
    const small = outcomes.best(measure, 'keyward', smallest)
    const big = outcomes.best(measure, 'keyward', largest)
    const ratio = small && big && small.rps > 0 ? big.rps / small.rps : null
    rows.push({
      name: `${name}: keyward's rate at ${fmt(largest)} records ÷ at ${fmt(smallest)}`,
      value: ratio === null ? 'not measured' : `**${pct(ratio)}** (${rate(big!.rps)} vs ${rate(small!.rps)} req/s)`,
      goal: `≥ ${pct(TARGETS.largeVsSmallRate)}`,
      ok: ratio === null ? null : ratio >= TARGETS.largeVsSmallRate,
      cpu: cpuPair(outcomes.lowestCpu(measure, 'keyward', largest), outcomes.lowestCpu(measure, 'keyward', smallest), [sizeLabel(largest), sizeLabel(smallest)]),
      runs: [small, big],
    })
  }
  rows.push(pageTarget(settings, outcomes, `${fmt(largest)} records`, `${fmt(smallest)}`))

  const kLarge = servers.find((s) => s.kind === 'keyward' && s.set?.size === largest)!
  const large = sets.find((s) => s.size === largest)!
  const fastest = fastestStart(kLarge)
  rows.push({
    name: `Start-up with ${fmt(large.meta.records)} records on disk (spawn until /healthz answers; the fastest of its ${kLarge.startups.length} starts, each alone)`,
    value: fastest === null ? 'not measured' : `**${fastest.seconds.toFixed(2)} s** (${fastest.cpuSeconds?.toFixed(2) ?? '?'} s of CPU; first start ${kLarge.startupSeconds!.toFixed(2)} s)`,
    goal: `< ${TARGETS.startupSeconds} s`,
    ok: fastest === null ? null : fastest.seconds < TARGETS.startupSeconds,
    cpu: '–',
    runs: [],
  })
  const perRecord = kLarge.rssAtReady !== null && Number.isFinite(kLarge.rssAtReady) ? kLarge.rssAtReady / large.meta.records : null
  rows.push({
    name: `Resident memory per record once ready (VmRSS ÷ ${fmt(large.meta.records)})`,
    value: perRecord === null ? 'not measured' : `**${fmt(Math.round(perRecord))} bytes** (${mib(kLarge.rssAtReady!)} MiB)`,
    goal: `< ${fmt(TARGETS.bytesPerRecord)} bytes`,
    ok: perRecord === null ? null : perRecord < TARGETS.bytesPerRecord,
    cpu: '–',
    runs: [],
  })
  if (snapshot) {
    const during = snapshot.during
    const measuredSnapshot = during !== null && snapshot.covered
    rows.push({
      name: `Reads while a snapshot of ${fmt(snapshot.records ?? large.meta.records)} records is written: p99.9 latency (${SNAPSHOT_CLIENTS} connections)`,
      value: measuredSnapshot ? `**${formatMs(during.p999Ms)}** (max ${formatMs(during.maxMs)}; ${during.timeouts} timeouts)` : snapshot.note ?? 'not measured',
      goal: `≤ ${TARGETS.snapshotP999Ms} ms`,
      ok: measuredSnapshot ? during.p999Ms <= TARGETS.snapshotP999Ms && during.timeouts === 0 : null,
      cpu: '–',
      runs: [during],
    })
  }
  return rows
}

/** keyward's CPU and the database's per request, beside the database's for keyward's statements alone and for the limit. */
function cpuSplit(outcomes: Outcomes, measure: Measure, size: number): string {
  const database = (kind: Kind) => cpu(outcomes.lowestCpu(measure, kind, size, 'databaseMicros'))
  return (
    `keyward ${cpu(outcomes.lowestCpu(measure, 'keyward', size))} + PostgreSQL ${database('keyward')}; ` +
    `PostgreSQL for keyward's statements ${database('pgbench: keyward')}, for the limit ${database('pgbench')}`
  )
}

/** The fastest of a server's starts (each on a fresh copy, nothing else measured meanwhile). */
const fastestStart = (s: Server) => (s.startups.length ? s.startups.reduce((a, b) => (b.seconds < a.seconds ? b : a)) : null)

function pageTarget(settings: Settings, outcomes: Outcomes, largeName: string, smallName: string): TargetRow {
  const [smallest, largest] = [settings.sizes[0]!, settings.sizes.at(-1)!]
  const small = outcomes.best('page', 'keyward', smallest)
  const big = outcomes.best('page', 'keyward', largest)
  const ratio = small && big ? big.meanMs / small.meanMs : null
  return {
    name: `Filtered page: keyward's mean latency at ${largeName} ÷ at ${smallName}`,
    value: ratio === null ? 'not measured' : `**${times(ratio)}** (${formatMs(big!.meanMs)} vs ${formatMs(small!.meanMs)})`,
    goal: `≤ ${TARGETS.pageLargeVsSmall}×`,
    ok: ratio === null ? null : ratio <= TARGETS.pageLargeVsSmall,
    cpu: cpuPair(outcomes.lowestCpu('page', 'keyward', largest), outcomes.lowestCpu('page', 'keyward', smallest), [sizeLabel(largest), sizeLabel(smallest)]),
    runs: [small, big],
  }
}

function postgresTargets(settings: Settings, input: ReportInput): TargetRow[] {
  const { outcomes } = input
  const largest = settings.sizes.at(-1)!
  const rows: TargetRow[] = []
  const kInsert = outcomes.best('insert64', 'keyward', largest)
  const pInsert = outcomes.best('insert64', 'pgbench', largest)
  rows.push({
    name: `Durable one-row create, ${INSERT_CLIENTS} clients: keyward (\`POST /api/organizations\`) ÷ pgbench's one-row insert on the same database`,
    value: kInsert && pInsert ? `**${pct(kInsert.rps / pInsert.rps)}** (${rate(kInsert.rps)} vs ${rate(pInsert.rps)} req/s)` : 'not measured',
    goal: `≥ ${pct(TARGETS.insertVsPgbench.postgres)}`,
    ok: kInsert && pInsert ? kInsert.rps / pInsert.rps >= TARGETS.insertVsPgbench.postgres : null,
    cpu: cpuSplit(outcomes, 'insert64', largest),
    runs: [kInsert, pInsert],
  })
  const readRatios = settings.sizes.map((size) => {
    const k = outcomes.best('read', 'keyward', size)
    const p = outcomes.best('read', 'pgbench', size)
    return k && p ? k.rps / p.rps : null
  })
  const measured = readRatios.filter((r): r is number => r !== null)
  const worst = measured.length === settings.sizes.length ? Math.min(...measured) : null
  const worstSize = worst === null ? largest : settings.sizes[readRatios.indexOf(worst)]!
  rows.push({
    name: `Read by id: keyward ÷ pgbench's select by primary key on the same database (the worse of the sizes)`,
    value: worst === null ? 'not measured' : `**${pct(worst)}** (${settings.sizes.map((size, i) => `${sizeLabel(size)} ${readRatios[i] === null ? '–' : pct(readRatios[i]!)}`).join(', ')})`,
    goal: `≥ ${pct(TARGETS.readVsPgbench)}`,
    ok: worst === null ? null : worst >= TARGETS.readVsPgbench,
    cpu: `at ${sizeLabel(worstSize)}: ${cpuSplit(outcomes, 'read', worstSize)}`,
    runs: [outcomes.best('read', 'keyward', worstSize), outcomes.best('read', 'pgbench', worstSize)],
  })
  rows.push(pageTarget(settings, outcomes, `${fmt(largest)} enrollments`, `${fmt(settings.sizes[0]!)}`))
  return rows
}

function dataSetsSection(L: string[], settings: Settings, input: ReportInput): void {
  const { sets } = input
  const embedded = settings.store === 'embedded'
  L.push('## Data sets', '')
  L.push(
    (embedded
      ? `"Records" are rows stored. A data set of N records: 1 vendor organization, 1 customer organization, ${APPLICATIONS} applications of ` +
        `that customer (environment ${ENVIRONMENT}), and E = round((N − ${FIXED_RECORDS}) / 3) enrollments, each with its own consumer and its ` +
        `own installation, spread round-robin over the applications. json-server gets the same records in a db.json, as the collections ` +
        `organizations, applications, consumers, installations and enrollments, each record with \`id\` = its primary key. `
      : `A data set of N enrollments: 1 vendor organization, 1 customer organization, ${APPLICATIONS} applications of that customer ` +
        `(environment ${ENVIRONMENT}), and N enrollments, each with its own consumer and its own installation, spread round-robin over ` +
        `the applications, and ${fmt(EMPTY_CUSTOMERS.postgres)} more customers of the vendor holding nothing, in a database of its own. ` +
        `The other customers are there because keyward's connections prepare each statement once and keep its plan: on a table of two ` +
        `organizations that plan is a sequential scan, and it stays one while the table grows (the one-row creates add tens of ` +
        `thousands), until autovacuum analyses the table; with a thousand rows it is an index scan from the start. `) +
      `Each is made by \`keyward init\`, then filled through the storage interface (\`storage.transaction\` with \`tx.insert\`, about 1,000 ` +
      `rows a transaction, records shaped as the services make them), so the server starts from data like its own ` +
      `(bench/support/dataset.ts); it is built once and kept in bench/.cache, and every server runs on a fresh copy` +
      (embedded ? ' of the data dir.' : ` (a database made from it as a template, \`CREATE DATABASE ... TEMPLATE\`), after a \`VACUUM ANALYZE\` at build time.`),
    '',
  )
  L.push(`| | ${sets.map((s) => s.label).join(' | ')} |`, `| --- | ${sets.map(() => '---:').join(' | ')} |`)
  const row = (name: string, cells: string[]) => L.push(`| ${name} | ${cells.join(' | ')} |`)
  row('records', sets.map((s) => `**${fmt(s.meta.records)}**`))
  for (const table of ['organizations', 'applications', 'consumers', 'installations', 'enrollments'] as const) row(table, sets.map((s) => fmt(s.meta.counts[table])))
  row('enrollments in the application of the filtered page', sets.map((s) => fmt(Math.ceil(s.meta.customers[0]!.enrollments / APPLICATIONS))))
  row(embedded ? 'data dir (snapshot and log)' : 'database size', sets.map((s) => `${mib(s.meta.bytes)} MiB`))
  if (embedded) row('json-server db.json', sets.map((s) => (s.meta.jsonServerDbBytes === null ? '–' : `${mib(s.meta.jsonServerDbBytes)} MiB`)))
  row('built through the storage interface in', sets.map((s) => `${s.meta.loadSeconds.toFixed(1)} s + ${s.meta.closeSeconds.toFixed(1)} s ${embedded ? 'closing (snapshot)' : 'VACUUM ANALYZE'}`))
  L.push('')
}

function startupSection(L: string[], settings: Settings, input: ReportInput): void {
  const { sets, servers } = input
  L.push('## Start-up and memory', '')
  L.push(
    'Start-up: from spawning the server until it answers (keyward: `GET /healthz`; json-server: `GET /organizations/{vendor id}`): ' +
      'the first start (each server alone, the largest first), and the fastest of every start (restarts on fresh copies after create ' +
      "runs included), with keyward's CPU time until then, the steadier figure when other sessions share the machine. Memory: VmRSS " +
      'from /proc/PID/status at the first start, and VmRSS / VmHWM (peak) at the end of its last run.',
    '',
  )
  L.push(
    '| server | records | start-up: first | fastest (CPU until ready) | VmRSS when ready | per record | VmRSS / VmHWM at the end of its last run |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  )
  for (const set of [...sets].reverse()) {
    for (const s of servers.filter((x) => x.set === set)) {
      const after = s.memory
      const fastest = fastestStart(s)
      L.push(
        `| ${s.kind} | ${fmt(set.meta.records)} | ${s.startupSeconds === null ? s.failure ?? '–' : `${s.startupSeconds.toFixed(2)} s`} | ` +
          `${fastest ? `${fastest.seconds.toFixed(2)} s of ${s.startups.length}${fastest.cpuSeconds !== null ? ` (${fastest.cpuSeconds.toFixed(2)} s)` : ''}` : '–'} | ` +
          `${s.rssAtReady === null ? '–' : `${mib(s.rssAtReady)} MiB`} | ${s.rssAtReady === null ? '–' : `${fmt(Math.round(s.rssAtReady / set.meta.records))} bytes`} | ` +
          `${after ? `${mib(after.rss)} / ${mib(after.hwm)} MiB` : '–'} |`,
      )
    }
  }
  L.push('')
}

/** Where a read's time goes: each step's best rate and CPU per request beside the bare server's. */
function ladderTable(L: string[], input: ReportInput, smallest: number): void {
  const { outcomes } = input
  L.push('### Where a read by id spends its time', '')
  L.push(
    `Each step answers keyward's bytes like the bare server, plus what the step adds (bench/ladder-server.ts), measured beside the ` +
      `smallest data set, as keyward is in the last row. CPU per request is the server process's, the steadier figure on a shared machine.`,
    '',
  )
  L.push('| step | req/s (best) | of bare | server CPU per request | CPU ÷ the Elysia route |', '| --- | ---: | ---: | ---: | ---: |')
  const bareBest = outcomes.best('read', 'bare', smallest)
  const elysiaCpu = outcomes.lowestCpu('read', 'elysia', smallest)
  const steps: [string, Kind][] = [
    ["bare Bun.serve: keyward's bytes, one canned Response per request", 'bare'],
    ...(Object.entries(LADDER) as [LadderKind, string][]).map(([kind, text]): [string, Kind] => [text, kind]),
    ['keyward: token check, scope, record, view, trace id, through its hooks', 'keyward'],
  ]
  for (const [text, kind] of steps) {
    const run = outcomes.best('read', kind, smallest)
    const cpuMicros = outcomes.lowestCpu('read', kind, smallest)
    L.push(
      `| ${text} | ${run ? rate(run.rps) : '–'} | ${run && bareBest ? pct(run.rps / bareBest.rps) : '–'} | ${cpu(cpuMicros)} | ` +
        `${cpuMicros !== null && elysiaCpu !== null ? times(cpuMicros / elysiaCpu) : '–'} |`,
    )
  }
  L.push('')
}

function snapshotSection(L: string[], snapshot: SnapshotPhase, sets: DataSet[]): void {
  const large = sets.at(-1)!
  L.push(`## Reads while a snapshot is written`, '')
  L.push(
    `keyward with ${fmt(snapshot.records ?? large.meta.records)} records (one create first, since a snapshot is only written when something ` +
      `changed), \`GET /api/enrollments/{id}\` with ${SNAPSHOT_CLIENTS} connections (bench/run-get.lua reports p99.9 and max). First a ` +
      `run without a snapshot; then a run that starts ${SNAPSHOT_LEAD_SECONDS} s before the server is sent ` +
      `SIGUSR1 ("write a snapshot now") and is stopped ${SNAPSHOT_LEAD_SECONDS} s after the new snapshot.json has replaced the old one ` +
      `(the data dir is watched: the snapshot is written to snapshot.json.tmp, then renamed), so it covers the whole write.`,
    '',
  )
  if (snapshot.baseline && snapshot.during) {
    L.push(
      '| run | req/s | mean | p99 | p99.9 | max | non-2xx / timeouts | other load on the machine |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    )
    for (const [name, r] of [
      ['without a snapshot', snapshot.baseline],
      ['while the snapshot is written', snapshot.during],
    ] as [string, Run][]) {
      L.push(
        `| ${name} | ${rate(r.rps)} | ${formatMs(r.meanMs)} | ${formatMs(r.p99Ms)} | **${formatMs(r.p999Ms)}** | ${formatMs(r.maxMs)} | ` +
          `${r.non2xx} / ${r.timeouts} | ${r.otherCores === null ? '–' : `${r.otherCores.toFixed(2)} cores`} |`,
      )
    }
    L.push(
      '',
      `Snapshot: ${snapshot.serverSeconds !== null ? `${snapshot.serverSeconds.toFixed(2)} s as the server logged it` : 'no duration logged by the server'}` +
        `${snapshot.watchedSeconds !== null ? `, ${snapshot.watchedSeconds.toFixed(2)} s from the temp file appearing to the rename` : ''}` +
        `${snapshot.signalToDoneSeconds !== null ? `, ${snapshot.signalToDoneSeconds.toFixed(2)} s from SIGUSR1 to the rename` : ''}` +
        `${snapshot.snapshotBytes !== null ? `; ${mib(snapshot.snapshotBytes)} MiB` : ''}. ` +
        `The read run ${snapshot.covered ? 'covered the whole snapshot write' : '**did not cover the whole snapshot write**'} ` +
        `(${snapshot.during.seconds.toFixed(1)} s).` +
        (snapshot.note ? ` ${snapshot.note}.` : ''),
    )
  } else {
    L.push(snapshot.note ?? 'Not measured.')
  }
  L.push('')
}

function notesSection(L: string[], settings: Settings, input: ReportInput): void {
  const { outcomes, servers } = input
  const embedded = settings.store === 'embedded'
  const allRuns = outcomes.entries().flatMap(([, o]) => o.runs)
  const non2xx = allRuns.reduce((sum, r) => sum + r.non2xx, 0)
  const disturbed = allRuns.filter((r) => r.otherCores !== null && r.otherCores >= DISTURBED_CORES).length
  const restarts = servers.filter((s) => s.restarts > 0).map((s) => `${s.name} ${s.restarts}×`)
  L.push('## Notes', '')
  L.push(
    `- Load generator: wrk with ${WRK_THREADS} thread${WRK_THREADS > 1 ? 's' : ''} on the same ${machineDescription().split(' · ')[0]} machine as the ` +
      `servers, --timeout ${WRK_TIMEOUT_SECONDS}s (a request unanswered by then counts as a timeout, not in the latencies); pgbench with as many ` +
      `threads (\`-j\`) and prepared statements. Server CPU per request is the server process's utime + stime (from /proc/PID/stat) over ` +
      `the run divided by the requests answered; database CPU per request the same for the PostgreSQL processes that worked for the ` +
      `run's database (its backends from pg_stat_activity and the server's background processes, such as the WAL writer, sampled every ` +
      `100 ms; backends of other databases, which other sessions may use, count as other load). Other load on the machine disturbs CPU per request much less than req/s. ` +
      `The lowest of the runs is shown. pgbench reports no latency percentiles (–).`,
    `- Servers: keyward as \`bun run src/main.ts serve ${embedded ? '--data DIR' : '--database-url URL'} --port P\` with ${input.environment.serveNote} ` +
      `(KEYWARD_* variables of the calling shell removed; its stderr read through a pipe, of which the last 16 KiB are kept)` +
      (embedded
        ? `; json-server ${JSON_SERVER_VERSION} as \`node --max-old-space-size=${JSON_SERVER_HEAP_MB} json-server --quiet --host 127.0.0.1 --port P db.json\` ` +
          `(installed with npm into bench/.json-server/); bench/ladder-server.ts on Bun. All on 127.0.0.1, all running for the whole benchmark.`
        : `. keyward keeps up to 16 connections to the database per instance; the database runs on the same machine, so keyward, ` +
          `PostgreSQL and the load generator share its cores.`),
    `- Warm-up: every measured run follows a discarded warm-up run of ${settings.warmupSeconds} s on the same server` +
      (embedded
        ? `, except json-server's creates (see above) and the runs whose request took over ${NO_WARMUP_ABOVE_MS} ms in the checks (json-server at ` +
          `the larger sizes: there the cost is the work of each request, not a cold JIT, and the requests a warm-up leaves queued would take seconds to drain).`
        : '.'),
    `- Between runs the benchmark waits until the servers are quiet again (at most ${quietTimeoutMs(settings) / 1000} s)` +
      (embedded ? ': json-server keeps answering the requests wrk gave up on, and keyward collects garbage after loading.' : '.'),
    `- Other load: for each run the benchmark also measures the CPU that everything else on the machine used meanwhile (its busy time ` +
      `from /proc/stat less that of the servers, the load generator, the database where the run used it, and the benchmark). Runs where ` +
      `it came to ${DISTURBED_CORES} cores or more are marked "other load" (${disturbed} of ${allRuns.length} runs); their req/s understate the server.`,
    `- ${non2xx === 0 ? 'Every measured request was answered 2xx.' : `**${fmt(non2xx)} measured requests were answered with a status ≥ 400** (pgbench: failed transactions): see the non-2xx column.`}`,
  )
  if (restarts.length) {
    L.push(
      embedded
        ? `- Restarts from the pristine data (before a run that followed a create run): ${restarts.join(', ')}.`
        : `- Only the keyward server of the data set being measured runs (each keeps up to 16 database connections, and pgbench's 64 ` +
            `beside several would pass max_connections): servers stopped and started again between data sets: ${restarts.join(', ')}.`,
    )
  }
  for (const [key, o] of outcomes.entries()) if (o.failures.length > 0) L.push(`- Not measured (${key}): ${[...new Set(o.failures)].join('; ')}`)
  for (const s of servers) if (s.failure) L.push(`- ${s.name}: ${s.failure}`)
  L.push('')
}

export function chart(settings: Settings, sets: DataSet[], outcomes: Outcomes): string {
  const keyward = '#1f6fd1'
  const jsonServer = '#e07b00'
  const bare = '#666666'
  const points = (measure: Measure, kind: Kind) =>
    settings.sizes
      .filter((size) => outcomes.of(measure, kind, size).runs.length > 0 || outcomes.of(measure, kind, size).failures.length > 0)
      .map((size) => ({ x: sets.find((s) => s.size === size)!.meta.records, y: outcomes.best(measure, kind, size)?.rps ?? NaN }))
  const series: Series[] = [
    { label: 'bare Bun.serve, read by id', color: bare, marker: 'triangle', points: points('read', 'bare') },
    { label: 'keyward, read by id', color: keyward, marker: 'circle', points: points('read', 'keyward') },
    { label: 'json-server, read by id', color: jsonServer, marker: 'circle', points: points('read', 'json-server') },
    { label: `keyward, filtered page`, color: keyward, dash: '2 4', marker: 'diamond', points: points('page', 'keyward') },
    { label: `json-server, filtered page`, color: jsonServer, dash: '2 4', marker: 'diamond', points: points('page', 'json-server') },
    { label: 'keyward, create ×64 (durable)', color: keyward, dash: '8 5', marker: 'square', points: points('create64', 'keyward') },
    { label: 'json-server, create ×64', color: jsonServer, dash: '8 5', marker: 'square', points: points('create64', 'json-server') },
    { label: 'keyward, create ×1 (durable)', color: keyward, dash: '12 4 2 4', marker: 'triangle', points: points('create1', 'keyward') },
    { label: 'json-server, create ×1', color: jsonServer, dash: '12 4 2 4', marker: 'triangle', points: points('create1', 'json-server') },
  ]
  return lineChartSvg({
    title: 'Throughput against data size (higher is better)',
    subtitle: `${settings.quick ? 'quick' : 'full'} run, ${new Date().toISOString().slice(0, 10)}, ${machineDescription()}; best run of each`,
    xLabel: 'records stored (log scale)',
    yLabel: 'requests per second (log scale)',
    xTicks: sets.map((s) => ({ value: s.meta.records, label: `${s.label} (${fmt(s.meta.records)})` })),
    series,
  })
}
