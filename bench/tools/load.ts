#!/usr/bin/env bun
/**
 * The load run (docs/security.md; a short one runs in CI as test/process/load.test.ts, the logic is
 * test/support/load/):
 *
 *   npm run bench -- load [--seconds 60] [--clients 64] [--tenants 4] [--seed N]
 *
 * A real server on a fresh temp data dir, several tenants with tokens for every role, and many
 * concurrent clients for the whole duration doing reads and writes across tenants (other tenants'
 * ids included). Every answer is classified as expected or unexpected; latency per request kind,
 * throughput, and the server's VmRSS every second. Prints the figures and writes them to
 * bench/results/load.md. Exit 1 on any unexpected answer or sustained memory growth.
 * Talks only to 127.0.0.1; the server and the temp dir are removed at the end, even on failure.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { benchmarkOptions } from '../support/options'
import { AUDIT_EVENT_BUDGET_BYTES, runLoad, type LoadReport } from '../../test/support/load'
import { killServers } from '../../test/support/server-process'

const values = benchmarkOptions('load', {
  seconds: { type: 'string', default: '60' },
  clients: { type: 'string', default: '64' },
  tenants: { type: 'string', default: '4' },
  seed: { type: 'string' },
})
const seconds = Number(values.seconds)
const clients = Number(values.clients)
const tenants = Number(values.tenants)
for (const [name, value, max] of [['seconds', seconds, 3600], ['clients', clients, 1024], ['tenants', tenants, 64]] as const) {
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`--${name} must be an integer from 1 to ${max}`)
}
if (tenants < 2) throw new Error('--tenants must be at least 2 (cross-tenant requests need another tenant)')
if (clients < tenants) throw new Error('--clients must be at least --tenants')

const parent = await mkdtemp(join(tmpdir(), 'keyward-load-'))
let report: LoadReport
try {
  report = await runLoad({
    dataDir: join(parent, 'data'),
    seconds,
    clients,
    tenants,
    ...(values.seed ? { seed: Number(values.seed) } : {}),
    log: (line) => console.error(line),
  })
} finally {
  await killServers() // one still running if the run failed part way
  await rm(parent, { recursive: true, force: true })
}

const MiB = 2 ** 20
const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
const n = (x: number) => x.toLocaleString('en-US')
const m = report.memory
const leak = m.growing === true
const verdict = report.unexpectedCount === 0 && !leak ? 'PASS' : 'FAIL'
const throughput = report.requests / (report.durationMs / 1000)
const full = report.perSecond.slice(0, Math.floor(report.durationMs / 1000)) // whole seconds only
const sortedSeconds = [...full].sort((a, b) => a - b)
const thirds = [0, 1, 2].map((i) => {
  const part = full.slice(Math.floor((i * full.length) / 3), Math.floor(((i + 1) * full.length) / 3))
  return part.reduce((a, b) => a + b, 0) / Math.max(1, part.length)
})
const statusList = (statuses: Record<string, number>) =>
  Object.entries(statuses)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, count]) => `${status}×${n(count)}`)
    .join(' ')
const kindRows = report.kinds
  .map((k) => `| ${k.kind} | ${n(k.count)} | ${statusList(k.statuses)} | ${k.unexpected} | ${ms(k.p50)} | ${ms(k.p99)} | ${ms(k.max)} |`)
  .join('\n')
const scenarioRows = Object.entries(report.scenarios)
  .sort(([, a], [, b]) => b - a)
  .map(([scenario, count]) => `| ${scenario} | ${n(count)} |`)
  .join('\n')
const rssRows = report.rss
  .filter((_, i) => i % 5 === 0 || i === report.rss.length - 1)
  .map(([t, rss]) => `${t.toFixed(0)} s: ${(rss / MiB).toFixed(0)}`)
  .join(' · ')
// The machine: whose CPU each third of the run went to, and what happened in the slowest seconds.
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN)
const machineThirds = [0, 1, 2].map((i) => {
  const part = report.machine.slice(Math.floor((i * report.machine.length) / 3), Math.floor(((i + 1) * report.machine.length) / 3))
  const stall = part.map((x) => x.ioStallMs).filter((x): x is number => x !== null)
  return `${mean(part.map((x) => x.serverCores)).toFixed(2)} / ${mean(part.map((x) => x.benchCores)).toFixed(2)} / ${mean(part.map((x) => x.otherCores)).toFixed(2)} cores, I/O stall ${stall.length ? `${mean(stall).toFixed(0)} ms/s` : 'n/a'}`
})
const slowSeconds = full
  .map((count, second) => ({ count, second, m: report.machine[second] }))
  .sort((a, b) => a.count - b.count)
  .slice(0, 3)
  .map(({ count, second, m }) =>
    `second ${second}: ${n(count)} answers${m ? `, server ${m.serverCores.toFixed(2)} / clients ${m.benchCores.toFixed(2)} / others ${m.otherCores.toFixed(2)} cores, iowait ${m.iowaitCores.toFixed(2)}, I/O stall ${m.ioStallMs?.toFixed(0) ?? 'n/a'} ms` : ''}`,
  )
const unexpectedSection =
  report.unexpectedCount > 0
    ? `\n## Unexpected answers (${n(report.unexpectedCount)})\n\n| category | count |\n| --- | ---: |\n${Object.entries(report.unexpectedByCategory)
        .map(([c, k]) => `| ${c} | ${n(k)} |`)
        .join('\n')}\n\n${report.unexpected.map((l) => `- ${l}`).join('\n')}\n`
    : ''
const stderrSection =
  report.serverStderr.length > 0
    ? `\nThe server wrote on stderr (${report.serverStderr.length} lines; first 20):\n\n\`\`\`\n${report.serverStderr.slice(0, 20).join('\n')}\n\`\`\`\n`
    : '\nThe server wrote nothing on stderr besides its usual start and stop lines.\n'

const markdown = `# keyward under load

${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'} · Bun ${Bun.version} · data dir in ${tmpdir()} · seed ${report.seed}

\`npm run bench -- load --seconds ${seconds} --clients ${clients}\`: a real \`keyward serve\` process on a fresh data dir
(compacting every ${report.compactAfterBytes / MiB} MiB of log, so snapshots are written under load); ${report.tenants} customers, half of them
enabled for virtual environments, each with a partner whose token is used and one whose state is toggled; ${report.tokens} tokens
(vendor admin from the first start, vendor viewer by \`keyward issue-token\` beside the running server, the rest by the
function it calls, with the data dir's secret: per customer admin, application_admin, viewer, and partner admin). Then
${clients} concurrent clients, ${clients / report.tenants} per customer, for ${seconds} s, each doing one request at a time: reads by id, lists with
filters and paging, other tenants' ids (which must answer 404 or match nothing), creates, updates, state changes,
enrollments and keysets with fresh P-256 keys, writes the token's role may not make, deliberate no-op transitions. Each
client writes only its own records, so it knows the one right answer to each request. At the end every record is read
back with the vendor token and compared with what the clients were told.

Result: **${verdict}**${verdict === 'FAIL' ? ` (${report.unexpectedCount} unexpected answers${leak ? ', memory keeps growing' : ''})` : ''}

| figure | value |
| --- | ---: |
| requests | **${n(report.requests)}** in ${(report.durationMs / 1000).toFixed(1)} s |
| throughput | **${n(Math.round(throughput))} req/s** |
| per second: min / median / max | ${n(sortedSeconds[0] ?? 0)} / ${n(sortedSeconds[Math.floor(sortedSeconds.length / 2)] ?? 0)} / ${n(sortedSeconds[sortedSeconds.length - 1] ?? 0)} |
| mean req/s in the first / middle / last third | ${thirds.map((x) => n(Math.round(x))).join(' / ')} |
| **unexpected answers** | **${n(report.unexpectedCount)}** |
| answers by status | ${statusList(report.statuses)} |
| records checked at the end | ${n(report.finalChecks)} |
| records at the end | ${Object.entries(report.recordsAtEnd).map(([k, v]) => `${k} ${n(v)}`).join(', ')} |
| records created after the first third | ${n(report.recordsCreatedAfterWarmup)} |
| compactions seen (a new log segment), at | ${report.segmentTimes.length}${report.segmentTimes.length ? `: ${report.segmentTimes.map((t) => `${t.toFixed(1)} s`).join(', ')}` : ''} |
| set-up (tenants, tokens, seed records) | ${(report.setupMs / 1000).toFixed(1)} s |
| graceful stop at the end | exit ${report.serverExitCode} |

Unexpected means: any 5xx; any status other than the one the client's model predicts (a deliberate no-op transition is
an expected 409, a viewer's write an expected 403); any 2xx to a request with another tenant's id; any record of another
tenant in an answer; a body that contradicts what the client knows; a timeout (15 s) or connection error; a record that
differs at the end from its last acknowledged state, or exists though no acknowledged write made it.

| requests by scenario | count |
| --- | ---: |
${scenarioRows}

## Latency by request kind (ms, measured at the client, on the same machine)

| request | count | answers | unexpected | p50 | p99 | max |
| --- | ---: | --- | ---: | ---: | ---: | ---: |
${kindRows}

Answers per second: ${full.map(n).join(' · ')}

CPU (server / clients / every other process on the machine) and I/O stall (PSI full) by third of the run:
${machineThirds.map((line, i) => `${['first', 'middle', 'last'][i]} ${line}`).join('; ')}.
The ${slowSeconds.length} seconds with the fewest answers: ${slowSeconds.join('; ')}.

Slowest requests: ${report.slowest.map(([took, at, kind]) => `${ms(took)} ms (${kind}, sent at ${at.toFixed(1)} s)`).join('; ')}
${unexpectedSection}
## Server memory (VmRSS, sampled every second)

| figure | value |
| --- | ---: |
| first / last / max | ${m.firstMiB.toFixed(0)} / ${m.lastMiB.toFixed(0)} / ${m.maxMiB.toFixed(0)} MiB |
| audit events stored, first → last sample | ${m.auditEventsFirst === null ? 'not read' : `${n(m.auditEventsFirst)} → ${n(m.auditEventsLast!)}`} |
| raw VmRSS: slope over the middle and last thirds | ${m.rawSlopeMiBPerMin.toFixed(1)} MiB/min |
| VmRSS less the audit trail at ${AUDIT_EVENT_BUDGET_BYTES} bytes an event: mean of the middle third → last third | ${m.middleThirdMeanMiB.toFixed(1)} → ${m.lastThirdMeanMiB.toFixed(1)} MiB (${(m.lastThirdMeanMiB - m.middleThirdMeanMiB >= 0 ? '+' : '')}${(m.lastThirdMeanMiB - m.middleThirdMeanMiB).toFixed(1)}) |
| the same: slope over the middle and last thirds | ${m.slopeMiBPerMin.toFixed(1)} MiB/min (${m.slopeBytesPerRequest.toFixed(1)} bytes per request) |
| fails when (on VmRSS less the audit trail) | growth > ${m.thresholdMiB} MiB **and** slope > ${m.thresholdSlopeMiBPerMin} MiB/min |
| keeps growing | **${m.growing === null ? `not judged (${m.samples} samples)` : m.growing ? 'yes' : 'no'}** |

VmRSS in MiB: ${rssRows}

Why these thresholds: the records are bounded (each client creates at most 80, nearly all in the first third), so a
few MiB of real growth at most; the audit trail is not (every acknowledged change keeps an event), so it is taken out at
its budget of ${AUDIT_EVENT_BUDGET_BYTES} bytes an event (about 210 measured: README "The audit trail's cost"), and a trail over
that budget shows up as growth. On a healthy server the RSS swings by about 10 MiB between collections, the thirds'
means stay within ±4 MiB and the fitted slope within ±13 MiB/min; 24 MiB/min is 30-70 bytes per request at the
6,000-14,000 req/s this machine serves, less than one small object kept per request. Both conditions must hold, so one
late GC swing, or a trend inside the noise, does not fail the run. See test/support/load/memory.ts.
${stderrSection}`

console.log(markdown)
await writeFile(join(import.meta.dir, '..', 'results', 'load.md'), markdown)
process.exitCode = verdict === 'PASS' ? 0 : 1
