#!/usr/bin/env bun
/**
 * The long crash loop (docs/storage.md; the short one runs in CI as test/process/crash-loop.test.ts,
 * the logic is test/support/crash-loop/):
 *
 *   npm run bench -- crash-loop --kills 200 [--clients 24] [--seed N]
 *
 * A real server on a fresh temp data dir, many concurrent clients doing every kind of write, SIGKILL
 * at random instants, restart, and every acknowledged write checked. Prints the figures and writes
 * them to bench/results/crash-loop.md. Exit 1 if any acknowledged write was lost.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { benchmarkOptions } from '../support/options'
import { runCrashLoop } from '../../test/support/crash-loop'
import { killServers } from '../../test/support/server-process'

const values = benchmarkOptions('crash-loop', { kills: { type: 'string', default: '200' }, clients: { type: 'string', default: '24' }, seed: { type: 'string' } })
const kills = Number(values.kills)
const clients = Number(values.clients)

const parent = await mkdtemp(join(tmpdir(), 'keyward-crash-loop-'))
let report
try {
  report = await runCrashLoop({
    dataDir: join(parent, 'data'),
    kills,
    clients,
    ...(values.seed ? { seed: Number(values.seed) } : {}),
    log: (line) => console.error(line),
  })
} finally {
  await killServers() // one still running if the loop failed part way
  await rm(parent, { recursive: true, force: true })
}

const byOperation = Object.entries(report.acknowledgedByOperation)
  .sort(([a], [b]) => a.localeCompare(b))
  .map(([operation, count]) => `| ${operation} | ${count} |`)
  .join('\n')
const verdict = report.writesLost === 0 && report.unexpected.length === 0 ? 'PASS' : 'FAIL'
const markdown = `# keyward crash loop

${new Date().toISOString()} · ${cpus().length} × ${cpus()[0]?.model.trim() ?? 'CPU'} · Bun ${Bun.version} · data dir in ${tmpdir()} · seed ${report.seed}

\`npm run bench -- crash-loop --kills ${kills} --clients ${clients}\`: a real \`keyward serve\` process, ${clients} concurrent
clients doing every kind of write, SIGKILL at a random instant 50-600 ms after each (re)start (about 1 in 5
while a graceful stop is writing its snapshot), restart on the same data dir (about 1 in 7 restarts
killed during start-up first), every record read back and compared with its latest acknowledged state.
The server compacts (snapshot, new log segment, old ones deleted) every ${report.compactAfterBytes / 1024} KiB of log, so kills
also land in compactions under load.

| figure | value |
| --- | ---: |
| kills (SIGKILL) | **${report.kills}** |
| of which during a graceful stop (snapshot being written) | ${report.killsDuringShutdown} |
| graceful stops that finished before their SIGKILL | ${report.gracefulStopsFinished} |
| extra kills during a restart's start-up | ${report.killsDuringStartup} |
| log segments seen (each compaction or graceful stop starts one) | ${report.segmentsSeen} |
| acknowledged (2xx) writes | **${report.acknowledgedWrites}** |
| writes cut off by a kill (no answer: either outcome allowed) | ${report.unansweredWrites} |
| records found changed by such an unanswered write | ${report.unansweredFoundDone} |
| restarts that dropped a torn last log record (with a warning) | ${report.tornTailWarnings} |
| **acknowledged writes lost** | **${report.writesLost}** |
| unexpected answers | ${report.unexpected.length} |
| records at the end / record checks done | ${report.recordsAtEnd} / ${report.recordChecks} |
| audit events compared with their records | ${report.eventChecks} |
| duration | ${(report.durationMs / 1000).toFixed(1)} s |

Result: **${verdict}**

A kill seldom lands inside a write() call (a batch is a few pages), so torn log tails from real kills are
rare; test/process/damage.test.ts and test/unit/log-format.test.ts make them on purpose.

| acknowledged writes by operation | count |
| --- | ---: |
${byOperation}
${report.lost.length > 0 ? `\nLost:\n\n${report.lost.map((l) => `- ${l}`).join('\n')}\n` : ''}${report.unexpected.length > 0 ? `\nUnexpected:\n\n${report.unexpected.map((l) => `- ${l}`).join('\n')}\n` : ''}`

console.log(markdown)
await writeFile(join(import.meta.dir, '..', 'results', 'crash-loop.md'), markdown)
process.exitCode = verdict === 'PASS' ? 0 : 1
