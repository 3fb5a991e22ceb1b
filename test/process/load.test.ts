/**
 * The load run, short (docs/security.md; the long run is bench/tools/load.ts, the logic test/support/load/):
 * a real server, four tenants with tokens for every role, 16 concurrent clients making 2,000 requests of
 * reads, writes, other tenants' ids and refused requests at once. Every answer must be the one the
 * clients' model predicts (no 5xx, no cross-tenant answer, no timeout), and every record read back
 * at the end must be as the clients were told. Memory is not judged in so short a run.
 * A failure prints its seed; LOAD_SEED=<seed> repeats the same choices (not the same interleaving).
 */
import { afterAll, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { runLoad } from '../support/load'
import { killServers } from '../support/server-process.ts'

const parent = tempDir('keyward-load-')
afterAll(async () => {
  await killServers() // one a failed run left running
  rmSync(parent, { recursive: true, force: true })
})

test('concurrent clients of four tenants get only expected answers', async () => {
  const seed = process.env.LOAD_SEED ? Number(process.env.LOAD_SEED) : undefined
  // A fixed amount of work (the time is only a bound): what it proves does not hang on the machine's speed.
  const report = await runLoad({ dataDir: join(parent, 'data'), seconds: 20, requests: 2_000, clients: 16, ...(seed !== undefined ? { seed } : {}) })
  const summary = `seed ${report.seed}: ${report.requests} requests, ${report.unexpectedCount} unexpected`
  console.log(`load: ${summary} (${Math.round(report.requests / (report.durationMs / 1000))} req/s, set-up ${report.setupMs} ms, ${report.finalChecks} records checked)`)
  expect([summary, report.unexpected]).toEqual([summary, []])
  expect(report.unexpectedCount).toBe(0)
  expect(report.serverExitCode).toBe(0)
  expect(report.serverStderr).toEqual([])
  // All of the work was done, and every scenario reached.
  expect(report.requests).toBeGreaterThanOrEqual(2_000)
  for (const scenario of ['normal', 'cross-tenant', 'out-of-scope', 'forbidden', 'conflict', 'not-enabled']) {
    expect([scenario, report.scenarios[scenario] ?? 0]).not.toEqual([scenario, 0])
  }
}, 30000)
