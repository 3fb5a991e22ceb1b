#!/usr/bin/env bun
/**
 * The benchmark driver (`npm run bench -- [BENCHMARK] [options]`, or `bun run bench/run.ts ...`),
 * run by hand, never in CI. Each benchmark is a module of bench/tools/, on the support code of
 * bench/support/, and reads its own options:
 *
 *   (none)       limits.ts: keyward against its limits: the read ladder, json-server, pgbench
 *                (docs/benchmarks.md; `--store postgres`: docs/benchmarks-postgres.md)
 *   abuse        abuse.ts: one tenant's abusive requests against another's reads (docs/abuse.md)
 *   audit        audit.ts: the audit trail's memory, start-up and create cost (docs/benchmarks-audit.md)
 *   load         load.ts: mixed load, every answer and the memory checked (bench/results/load.md)
 *   crash-loop   crash-loop.ts: kill -9 at random instants under load (bench/results/crash-loop.md)
 */
const BENCHMARKS: Record<string, string> = {
  abuse: './tools/abuse.ts',
  audit: './tools/audit.ts',
  load: './tools/load.ts',
  'crash-loop': './tools/crash-loop.ts',
}

const first = process.argv[2] ?? ''
const named = BENCHMARKS[first]
if (!named && first !== '' && !first.startsWith('-')) {
  console.error(`bench/run.ts: unknown benchmark '${first}': use ${Object.keys(BENCHMARKS).join(', ')}, or none for the limits benchmark`)
  process.exit(2)
}
// The benchmark reads its options from process.argv, as when it is run on its own.
if (named) process.argv.splice(2, 1)
await import(named ?? './tools/limits.ts')

// A module (for the top-level await above), exporting nothing.
export {}
