/**
 * The report bench/run.ts writes: docs/benchmarks.md (targets, data sets, every phase, the read
 * ladder, start-up and memory, reads during a snapshot) and the chart, docs/benchmarks.svg.
 */
import { QUICK, MODE, SMALLEST, MID, LARGEST, SIZES, APPLICATIONS, FIXED_RECORDS, ROUNDS, WARMUP_SECONDS, RUN_SECONDS, SLOW_RUN_CAP_SECONDS, READ_CLIENTS, PAGE_CLIENTS, PAGE_SIZE, SNAPSHOT_CLIENTS, SNAPSHOT_LEAD_SECONDS, SNAPSHOT_BASELINE_SECONDS, WRK_TIMEOUT_SECONDS, QUIET_TIMEOUT_MS, NO_WARMUP_ABOVE_MS, DISTURBED_CORES, JSON_SERVER_VERSION, JSON_SERVER_HEAP_MB, TARGETS, fmt, sizeLabel, type Kind, type LadderKind, LADDER, type Phase, PHASES, type DataSet, type Server, type Run, outcomes, outcomeOf, type SnapshotPhase } from './run-model'
import { ENVIRONMENT } from './dataset'
import { machineDescription, mib } from './system'
import { formatMs, WRK_THREADS, type WrkResult } from './wrk'
import { lineChartSvg, type Series } from './chart'
// ---------------------------------------------------------------------------------------------
// Report

export const best = (runs: Run[], pick: 'rps' | 'latency'): Run | null => {
  if (runs.length === 0) return null
  return runs.reduce((a, b) => (pick === 'rps' ? (b.rps > a.rps ? b : a) : b.meanMs < a.meanMs ? b : a))
}
export const bestRps = (phase: Phase, kind: Kind, size: number) => best(outcomeOf(phase, kind, size).runs, 'rps')?.rps ?? null
export const lowestCpu = (phase: Phase, kind: Kind, size: number) => {
  const values = outcomeOf(phase, kind, size).runs.map((r) => r.cpuMicros).filter((v): v is number => v !== null)
  return values.length ? Math.min(...values) : null
}
export const rate = (rps: number | null) => (rps === null ? '–' : rps >= 100 ? fmt(Math.round(rps)) : rps.toFixed(2))
export const cpu = (micros: number | null) => (micros === null ? '–' : micros >= 1000 ? `${fmt(Math.round(micros))} µs` : `${micros.toFixed(1)} µs`)
export const pct = (ratio: number) => `${(ratio * 100).toFixed(0)}%`
export const times = (ratio: number) => (ratio >= 100 ? `${fmt(Math.round(ratio))}×` : `${ratio.toFixed(2)}×`)

export interface ReportInput {
  readonly sets: DataSet[]
  readonly servers: Server[]
  readonly bare: Server
  readonly snapshot: SnapshotPhase
  readonly busy: string | null
  readonly wallSeconds: number
  /** Size on the wire and of the body of keyward's answer to the read, which the bare server repeats. */
  readonly bareBytes: number
  readonly bareBodyBytes: number
}

export function report(input: ReportInput): { markdown: string; failed: boolean } {
  const { sets, servers, snapshot, bareBytes, bareBodyBytes } = input
  const L: string[] = []
  const server = (kind: Kind, size: number) => servers.find((s) => s.kind === kind && s.set?.size === size)!
  const large = sets.find((s) => s.size === LARGEST)!

  L.push('# keyward benchmarks', '')
  L.push(
    `${new Date().toISOString()} · ${MODE} run (\`npm run bench${QUICK ? ' -- --quick' : ''}\`; ${ROUNDS} round${ROUNDS > 1 ? 's' : ''}, ` +
      `${WARMUP_SECONDS}s warm-up + ${RUN_SECONDS}s measured per run, best run of each side kept) · ${machineDescription()} · ` +
      `Node ${nodeVersion()} · json-server ${JSON_SERVER_VERSION} · wrk -t${WRK_THREADS}${input.busy ? ` · CPU busy before start: ${input.busy}` : ''} · ` +
      `${fmt(Math.round(input.wallSeconds))} s in all`,
  )
  L.push('', 'Written by `bench/run.ts` on every run: do not edit by hand. All figures are from this one run on this machine; the ratios compare sides measured in turn within it, so that the noise of a shared machine hits them alike.', '')

  // Targets. Beside each: the server CPU per request of the runs compared (steadier than req/s on a
  // shared machine), and a warning when other processes used the CPU during one of those runs.
  interface TargetRow {
    readonly name: string
    readonly value: string
    readonly goal: string
    readonly ok: boolean | null
    readonly cpu: string
    readonly runs: (Run | null)[]
  }
  const rows: TargetRow[] = []
  const bestOf = (phase: Phase, kind: Kind, size: number) => best(outcomeOf(phase, kind, size).runs, phase === 'page' ? 'latency' : 'rps')
  const cpuPair = (a: number | null, b: number | null, names: [string, string]) =>
    a === null || b === null ? '–' : `${names[0]} ${cpu(a)} vs ${names[1]} ${cpu(b)} (${a / b >= 0.1 ? times(a / b) : `÷${fmt(Math.round(b / a))}`})`

  const bareRuns = SIZES.map((size) => bestOf('read', 'bare', size))
  const bareRun = bareRuns.reduce<Run | null>((a, b) => (b && (!a || b.rps > a.rps) ? b : a), null)
  const readRatios = SIZES.map((size) => {
    const k = bestOf('read', 'keyward', size)
    return k && bareRun ? k.rps / bareRun.rps : null
  })
  const measuredRatios = readRatios.filter((r): r is number => r !== null)
  const readWorst = measuredRatios.length === SIZES.length ? Math.min(...measuredRatios) : null
  const worstSize = readWorst === null ? SMALLEST : SIZES[readRatios.indexOf(readWorst)]!
  rows.push({
    name: 'Authenticated read by id: keyward ÷ bare Bun.serve (the worst of the three sizes; bare: its best run)',
    value: readWorst === null ? 'not measured' : `**${pct(readWorst)}** (${SIZES.map((size, i) => `${sizeLabel(size)} ${readRatios[i] === null ? '–' : pct(readRatios[i]!)}`).join(', ')})`,
    goal: `≥ ${pct(TARGETS.readVsBare)}`,
    ok: readWorst === null ? null : readWorst >= TARGETS.readVsBare,
    cpu: cpuPair(lowestCpu('read', 'keyward', worstSize), Math.min(...SIZES.map((size) => lowestCpu('read', 'bare', size) ?? Infinity)), [`keyward ${sizeLabel(worstSize)}`, 'bare']),
    runs: [bestOf('read', 'keyward', worstSize), bareRun],
  })

  const kCreate = bestOf('create64', 'keyward', MID)
  const jCreate = bestOf('create64', 'json-server', MID)
  const createRatio = kCreate && jCreate && jCreate.rps > 0 ? kCreate.rps / jCreate.rps : null
  const noJsonCreate = kCreate !== null && jCreate !== null && jCreate.rps === 0
  rows.push({
    name: `Durable create, 64 clients, at ${fmt(MID)} records: keyward ÷ json-server (which does not fsync)`,
    value:
      createRatio !== null
        ? `**${times(createRatio)}** (${rate(kCreate!.rps)} vs ${rate(jCreate!.rps)} req/s)`
        : noJsonCreate
          ? `json-server completed no create in its run (keyward ${rate(kCreate!.rps)} req/s)`
          : 'not measured',
    goal: `≥ ${TARGETS.createVsJsonServer}×`,
    ok: createRatio !== null ? createRatio >= TARGETS.createVsJsonServer : noJsonCreate ? true : null,
    cpu: cpuPair(lowestCpu('create64', 'keyward', MID), lowestCpu('create64', 'json-server', MID), ['keyward', 'json-server']),
    runs: [kCreate, jCreate],
  })

  for (const [phase, name] of [
    ['read', 'Read by id'],
    ['create1', 'Create, 1 client'],
    ['create64', 'Create, 64 clients'],
  ] as [Phase, string][]) {
    const small = bestOf(phase, 'keyward', SMALLEST)
    const big = bestOf(phase, 'keyward', LARGEST)
    const ratio = small && big && small.rps > 0 ? big.rps / small.rps : null
    rows.push({
      name: `${name}: keyward's rate at ${fmt(LARGEST)} records ÷ at ${fmt(SMALLEST)}`,
      value: ratio === null ? 'not measured' : `**${pct(ratio)}** (${rate(big!.rps)} vs ${rate(small!.rps)} req/s)`,
      goal: `≥ ${pct(TARGETS.largeVsSmallRate)}`,
      ok: ratio === null ? null : ratio >= TARGETS.largeVsSmallRate,
      cpu: cpuPair(lowestCpu(phase, 'keyward', LARGEST), lowestCpu(phase, 'keyward', SMALLEST), [sizeLabel(LARGEST), sizeLabel(SMALLEST)]),
      runs: [small, big],
    })
  }

  const pageSmall = bestOf('page', 'keyward', SMALLEST)
  const pageBig = bestOf('page', 'keyward', LARGEST)
  const pageRatio = pageSmall && pageBig ? pageBig.meanMs / pageSmall.meanMs : null
  rows.push({
    name: `Filtered page: keyward's mean latency at ${fmt(LARGEST)} records ÷ at ${fmt(SMALLEST)}`,
    value: pageRatio === null ? 'not measured' : `**${times(pageRatio)}** (${formatMs(pageBig!.meanMs)} vs ${formatMs(pageSmall!.meanMs)})`,
    goal: `≤ ${TARGETS.pageLargeVsSmall}×`,
    ok: pageRatio === null ? null : pageRatio <= TARGETS.pageLargeVsSmall,
    cpu: cpuPair(lowestCpu('page', 'keyward', LARGEST), lowestCpu('page', 'keyward', SMALLEST), [sizeLabel(LARGEST), sizeLabel(SMALLEST)]),
    runs: [pageSmall, pageBig],
  })

  const kLarge = server('keyward', LARGEST)
  rows.push({
    name: `Start-up with ${fmt(large.meta.records)} records on disk (spawn until /healthz answers)`,
    value: kLarge.startupSeconds === null ? 'not measured' : `**${kLarge.startupSeconds.toFixed(2)} s**`,
    goal: `< ${TARGETS.startupSeconds} s`,
    ok: kLarge.startupSeconds === null ? null : kLarge.startupSeconds < TARGETS.startupSeconds,
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
  const during = snapshot.during
  const measuredSnapshot = during !== null && snapshot.covered
  rows.push({
    name: `Reads while a snapshot of ${fmt(snapshot.records ?? large.meta.records)} records is written: p99.9 latency (${SNAPSHOT_CLIENTS} connections)`,
    value: measuredSnapshot ? `**${formatMs(during.p999Ms)}** (max ${formatMs(during.maxMs)}; ${during.timeouts} timeouts)` : snapshot.note ?? 'not measured',
    goal: `≤ ${TARGETS.snapshotP999Ms} ms`,
    ok: measuredSnapshot ? during.p999Ms <= TARGETS.snapshotP999Ms && during.timeouts === 0 : null,
    cpu: '–',
    runs: [],
  })
  const disturbedTarget = (r: TargetRow) => {
    const other = [...r.runs.map((run) => run?.otherCores ?? null), ...(r.name.startsWith('Reads while') ? [snapshot.duringOtherCores] : [])]
    const worst = Math.max(0, ...other.filter((v): v is number => v !== null))
    return worst >= DISTURBED_CORES ? ` ⚠ other load during a compared run (up to ${worst.toFixed(2)} cores)` : ''
  }
  const met = rows.filter((r) => r.ok === true).length
  L.push('## Targets', '')
  L.push(`${met} of ${rows.length} met.`, '')
  L.push('| target | measured | goal | | server CPU per request |', '| --- | --- | --- | --- | --- |')
  for (const r of rows) {
    L.push(`| ${r.name} | ${r.value}${disturbedTarget(r)} | ${r.goal} | ${r.ok === null ? 'not measured' : r.ok ? 'met' : '**MISSED**'} | ${r.cpu} |`)
  }
  L.push('')

  // Data sets.
  L.push('## Data sets', '')
  L.push(
    `"Records" are rows stored. A data set of N records: 1 vendor organization (created by \`initialiseStorage\`), 1 customer ` +
      `organization, ${APPLICATIONS} applications of that customer (environment ${ENVIRONMENT}), and E = round((N − ${FIXED_RECORDS}) / 3) ` +
      `enrollments, each with its own consumer and its own installation, spread round-robin over the applications. keyward's data ` +
      `dirs are built through the store (Store.open, initialiseStorage, store.commit with 1,000 puts per transaction, records shaped as ` +
      `the services make them; closing the store writes the snapshot), so each server starts from a dir like one it wrote itself. ` +
      `json-server gets the same records in a db.json, as the collections organizations, applications, consumers, installations and ` +
      `enrollments, each record with \`id\` = its primary key.`,
    '',
  )
  L.push(`| | ${sets.map((s) => s.label).join(' | ')} |`, `| --- | ${sets.map(() => '---:').join(' | ')} |`)
  const row = (name: string, cells: string[]) => L.push(`| ${name} | ${cells.join(' | ')} |`)
  row('records', sets.map((s) => `**${fmt(s.meta.records)}**`))
  for (const table of ['organizations', 'applications', 'consumers', 'installations', 'enrollments'] as const) row(table, sets.map((s) => fmt(s.meta.counts[table])))
  row('enrollments in the application of the filtered page', sets.map((s) => fmt(Math.ceil(s.meta.customers[0]!.enrollments / APPLICATIONS))))
  row('keyward snapshot (written when the build closed the store)', sets.map((s) => `${mib(s.meta.snapshotBytes)} MiB in ${s.meta.snapshotSeconds.toFixed(1)} s`))
  row('json-server db.json', sets.map((s) => (s.meta.jsonServerDbBytes === null ? '–' : `${mib(s.meta.jsonServerDbBytes)} MiB`)))
  row('built through the store in', sets.map((s) => `${s.meta.loadSeconds.toFixed(1)} s`))
  L.push('')

  // Start-up and memory.
  L.push('## Start-up and memory', '')
  L.push(
    'Start-up: from spawning the server until it answers (keyward: `GET /healthz`; json-server: `GET /organizations/{vendor id}`), ' +
      'each started alone, the largest first (the first start; later restarts on fresh copies are in the log only). Memory: VmRSS ' +
      'from /proc/PID/status at that moment, and VmRSS / VmHWM (peak) at the end of its last run.',
    '',
  )
  L.push('| server | records | start-up | VmRSS when ready | per record | VmRSS / VmHWM at the end of its last run |', '| --- | ---: | ---: | ---: | ---: | ---: |')
  for (const set of [...sets].reverse()) {
    for (const kind of ['keyward', 'json-server'] as Kind[]) {
      const s = server(kind, set.size)
      const after = s.memory
      L.push(
        `| ${kind} | ${fmt(set.meta.records)} | ${s.startupSeconds === null ? s.failure ?? '–' : `${s.startupSeconds.toFixed(2)} s`} | ` +
          `${s.rssAtReady === null ? '–' : `${mib(s.rssAtReady)} MiB`} | ${s.rssAtReady === null ? '–' : `${fmt(Math.round(s.rssAtReady / set.meta.records))} bytes`} | ` +
          `${after ? `${mib(after.rss)} / ${mib(after.hwm)} MiB` : '–'} |`,
      )
    }
  }
  L.push('')

  // Phases.
  // Where a read's time goes: each step's best rate and CPU per request beside the bare server's.
  const ladderTable = () => {
    L.push('### Where a read by id spends its time', '')
    L.push(
      `Each step answers keyward's bytes like the bare server, plus what the step adds (bench/ladder-server.ts), measured beside the ` +
        `smallest data set; keyward is its best size. The target asks keyward for ${pct(TARGETS.readVsBare)} of the first row.`,
      '',
    )
    L.push('| step | req/s (best) | of bare | server CPU per request |', '| --- | ---: | ---: | ---: |')
    const bareBest = bestOf('read', 'bare', SMALLEST)
    const keywardBest = SIZES.map((size) => bestOf('read', 'keyward', size)).reduce<Run | null>((a, b) => (b && (!a || b.rps > a.rps) ? b : a), null)
    const keywardCpu = Math.min(...SIZES.map((size) => lowestCpu('read', 'keyward', size) ?? Infinity))
    const steps: [string, Run | null, number | null][] = [
      ['bare Bun.serve: keyward\'s bytes, one canned Response per request', bareBest, lowestCpu('read', 'bare', SMALLEST)],
      ...(Object.entries(LADDER) as [LadderKind, string][]).map(([kind, text]): [string, Run | null, number | null] => [
        text,
        bestOf('read', kind, SMALLEST),
        lowestCpu('read', kind, SMALLEST),
      ]),
      ['keyward: token check, scope, record, view, trace id, through its hooks', keywardBest, Number.isFinite(keywardCpu) ? keywardCpu : null],
    ]
    for (const [text, run, cpuMicros] of steps) {
      L.push(`| ${text} | ${run ? rate(run.rps) : '–'} | ${run && bareBest ? pct(run.rps / bareBest.rps) : '–'} | ${cpu(cpuMicros)} |`)
    }
    L.push('')
  }

  const phaseTable = (phase: Phase, kinds: Kind[], intro: string) => {
    L.push(`## ${PHASES[phase].title}`, '', intro, '')
    L.push(
      '| records | server | req/s (best) | mean | p99 | p99.9 | server CPU per request | non-2xx / timeouts | every run: req/s |',
      '| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
    )
    for (const size of SIZES) {
      for (const kind of kinds) {
        const outcome = outcomeOf(phase, kind, size)
        const b = best(outcome.runs, phase === 'page' ? 'latency' : 'rps')
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
        const sizeCell = kind === 'bare' ? `(${sizeLabel(size)})` : fmt(sets.find((s) => s.size === size)!.meta.records)
        L.push(
          `| ${sizeCell} | ${kind === 'bare' ? 'bare Bun.serve' : kind} | ${b ? `**${rate(b.rps)}**` : '–'} | ${b ? formatMs(b.meanMs) : '–'} | ` +
            `${b ? formatMs(b.p99Ms) : '–'} | ${b ? formatMs(b.p999Ms) : '–'} | ${cpu(lowestCpu(phase, kind, size))} | ${bad} / ${timeouts} | ${every}${failures} |`,
        )
      }
    }
    L.push('')
  }
  phaseTable(
    'read',
    ['keyward', 'json-server', 'bare'],
    `keyward: \`GET /api/enrollments/{id}\` with a token of the customer organization, role admin; json-server: \`GET /enrollments/{id}\`; ` +
      `bare Bun.serve: keyward's own answer to that request (${bareBytes} bytes on the wire, body ${bareBodyBytes} bytes; the same status, ` +
      `headers and body, checked byte for byte with the Date and trace id masked), from bench/bare-server.ts. One fixed enrollment, ` +
      `the middle one of the data set (json-server searches its array up to it). ${READ_CLIENTS} connections. The bare server does not ` +
      `depend on the data set; it was run beside each size.`,
  )
  ladderTable()
  phaseTable(
    'page',
    ['keyward', 'json-server'],
    `keyward: \`GET /api/enrollments?application_ids=X&page=1&page_size=${PAGE_SIZE}\`; json-server: ` +
      `\`GET /enrollments?application_id=X&_page=1&_limit=${PAGE_SIZE}\`; X is the first of the ${APPLICATIONS} applications ` +
      `(a tenth of the enrollments), so the page is always full. ${PAGE_CLIENTS} connections; the best run is the one with the lowest mean latency.`,
  )
  for (const phase of ['create1', 'create64'] as Phase[]) {
    phaseTable(
      phase,
      ['keyward', 'json-server'],
      `keyward: \`POST /api/enrollments\` with fresh enrollment, consumer and installation ids per request (the server creates all three ` +
        `in one transaction, fsynced to its write-ahead log before the 201); json-server: \`POST /enrollments\` with the same body plus ` +
        `\`id\`. ${PHASES[phase].clients} connection${PHASES[phase].clients > 1 ? 's' : ''} (bench/run-create.lua). **json-server does not ` +
        `fsync**: it answers 201 once it has serialised its whole database (JSON.stringify of every collection, for every write) and ` +
        `writes the file afterwards, asynchronously, to a temp file renamed over db.json, without fsync. Its runs have no warm-up ` +
        `(every write would have to be undone; its reads warmed it up) and are longer at the sizes where one write takes seconds ` +
        `(at most ${SLOW_RUN_CAP_SECONDS} s); after each run it is stopped at once (it still has the writes wrk gave up on queued). ` +
        `Every create run of either server starts from the pristine data set: after a create run the server is started again on a ` +
        `fresh copy before its next run. Each create adds three rows to keyward (enrollment, consumer, installation), one to ` +
        `json-server; keyward's rows at the start and end of each run are shown (its warm-up, with one connection, comes ` +
        `first): a create run necessarily grows the data set, many times over at the smallest size.`,
    )
  }

  // Snapshot.
  L.push(`## Reads while a snapshot is written`, '')
  L.push(
    `keyward with ${fmt(snapshot.records ?? large.meta.records)} records (one create first, since a snapshot is only written when something ` +
      `changed), \`GET /api/enrollments/{id}\` with ${SNAPSHOT_CLIENTS} connections (bench/run-get.lua reports p99.9 and max). First a ` +
      `${SNAPSHOT_BASELINE_SECONDS} s run without a snapshot; then a run that starts ${SNAPSHOT_LEAD_SECONDS} s before the server is sent ` +
      `SIGUSR1 ("write a snapshot now") and is stopped ${SNAPSHOT_LEAD_SECONDS} s after the new snapshot.json has replaced the old one ` +
      `(the data dir is watched: the snapshot is written to snapshot.json.tmp, then renamed), so it covers the whole write.`,
    '',
  )
  if (snapshot.baseline && snapshot.during) {
    L.push(
      '| run | req/s | mean | p99 | p99.9 | max | non-2xx / timeouts | other load on the machine |',
      '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    )
    for (const [name, r, other] of [
      ['without a snapshot', snapshot.baseline, snapshot.baseline.otherCores],
      ['while the snapshot is written', snapshot.during, snapshot.duringOtherCores],
    ] as [string, WrkResult, number | null][]) {
      L.push(
        `| ${name} | ${rate(r.rps)} | ${formatMs(r.meanMs)} | ${formatMs(r.p99Ms)} | **${formatMs(r.p999Ms)}** | ${formatMs(r.maxMs)} | ` +
          `${r.non2xx} / ${r.timeouts} | ${other === null ? '–' : `${other.toFixed(2)} cores`} |`,
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

  // Chart and notes.
  L.push('## Throughput against data size', '', '![Throughput in requests per second against records, log scales, per server and phase](benchmarks.svg)', '')
  const failures = [...outcomes.entries()].filter(([, o]) => o.failures.length > 0)
  const allRuns = [...outcomes.values()].flatMap((o) => o.runs)
  const non2xx = allRuns.reduce((sum, r) => sum + r.non2xx, 0)
  const disturbed = allRuns.filter((r) => r.otherCores !== null && r.otherCores >= DISTURBED_CORES).length
  const restarts = servers.filter((s) => s.restarts > 0).map((s) => `${s.name} ${s.restarts}×`)
  L.push('## Notes', '')
  L.push(
    `- Load generator: wrk with ${WRK_THREADS} thread${WRK_THREADS > 1 ? 's' : ''} on the same ${machineDescription().split(' · ')[0]} machine as the ` +
      `servers, --timeout ${WRK_TIMEOUT_SECONDS}s (a request unanswered by then counts as a timeout, not in the latencies). ` +
      `Server CPU per request is the server process's utime + stime (from /proc/PID/stat) over the run divided by the requests ` +
      `answered; other load on the machine disturbs it much less than req/s. The lowest of the runs is shown.`,
    `- Servers: keyward as \`bun run src/main.ts serve --data DIR --port P\` (KEYWARD_* variables of the calling shell removed); ` +
      `json-server ${JSON_SERVER_VERSION} as \`node --max-old-space-size=${JSON_SERVER_HEAP_MB} json-server --quiet --host 127.0.0.1 --port P db.json\` ` +
      `(installed with npm into bench/.json-server/); bench/bare-server.ts on Bun. All on 127.0.0.1, all running for the whole benchmark.`,
    `- Warm-up: every measured run follows a discarded warm-up run of ${WARMUP_SECONDS} s on the same server, except json-server's creates ` +
      `(see above) and the runs whose request took over ${NO_WARMUP_ABOVE_MS} ms in the checks (json-server at the larger sizes: ` +
      `there the cost is the work of each request, not a cold JIT, and the requests a warm-up leaves queued would take seconds to drain).`,
    `- Between runs the benchmark waits until the servers are quiet again (at most ${QUIET_TIMEOUT_MS / 1000} s): json-server keeps answering the ` +
      `requests wrk gave up on, and keyward collects garbage after loading.`,
    `- Other load: for each run the benchmark also measures the CPU that everything else on the machine used meanwhile (its busy time ` +
      `from /proc/stat less that of the servers, wrk and the benchmark). Runs where it came to ${DISTURBED_CORES} cores or more are ` +
      `marked "other load" (${disturbed} of ${allRuns.length} runs); their req/s understate the server.`,
    `- ${non2xx === 0 ? 'Every measured request was answered 2xx.' : `**${fmt(non2xx)} measured requests were answered with a status ≥ 400**: see the non-2xx column.`}`,
  )
  if (restarts.length) L.push(`- Restarts from the pristine data (before a run that followed a create run): ${restarts.join(', ')}.`)
  for (const [key, o] of failures) L.push(`- Not measured (${key}): ${[...new Set(o.failures)].join('; ')}`)
  for (const s of servers) if (s.failure) L.push(`- ${s.name}: ${s.failure}`)
  L.push('')

  const failed = [...outcomes.entries()].some(([key, o]) => !key.includes('/json-server/') && o.failures.length > 0)
  return { markdown: L.join('\n'), failed }
}

export function chart(sets: DataSet[]): string {
  const keyward = '#1f6fd1'
  const jsonServer = '#e07b00'
  const bare = '#666666'
  const points = (phase: Phase, kind: Kind) =>
    SIZES.filter((size) => outcomeOf(phase, kind, size).runs.length > 0 || outcomeOf(phase, kind, size).failures.length > 0).map((size) => ({
      x: sets.find((s) => s.size === size)!.meta.records,
      y: bestRps(phase, kind, size) ?? NaN,
    }))
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
    subtitle: `${MODE} run, ${new Date().toISOString().slice(0, 10)}, ${machineDescription()}; best run of each`,
    xLabel: 'records stored (log scale)',
    yLabel: 'requests per second (log scale)',
    xTicks: sets.map((s) => ({ value: s.meta.records, label: `${s.label} (${fmt(s.meta.records)})` })),
    series,
  })
}

export function nodeVersion(): string {
  try {
    return Bun.spawnSync(['node', '--version']).stdout.toString().trim().replace(/^v/, '')
  } catch {
    return '?'
  }
}

