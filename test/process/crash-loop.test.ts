/**
 * The crash loop, short (docs/storage.md; the long run is bench/tools/crash-loop.ts): a real server under
 * many concurrent clients doing every kind of write, SIGKILLed at random instants and restarted on
 * the same data dir. Every acknowledged write must survive with its acknowledged effect, and the
 * audit trail must match the records: no change without its event, no event without its change.
 * A failure prints its seed; CRASH_LOOP_SEED=<seed> repeats the same operations and delays.
 */
import { afterAll, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { runCrashLoop } from '../support/crash-loop'
import { killServers } from '../support/server-process.ts'

const parent = tempDir('keyward-crash-loop-')
afterAll(async () => {
  await killServers() // those a failed test left running
  rmSync(parent, { recursive: true, force: true })
})

test('kill -9 at random instants loses no acknowledged write', async () => {
  const seed = process.env.CRASH_LOOP_SEED ? Number(process.env.CRASH_LOOP_SEED) : undefined
  // 40 writes acknowledged in each round before its kill is timed, so that the run does the same
  // amount of work on any machine (and gets through every kind of write); then a random instant.
  const report = await runCrashLoop({
    dataDir: join(parent, 'data'),
    kills: 5,
    clients: 24,
    acknowledgedBeforeKill: 40,
    minKillDelayMs: 0,
    maxKillDelayMs: 400,
    ...(seed !== undefined ? { seed } : {}),
  })
  const summary = `seed ${report.seed}: ${report.acknowledgedWrites} acknowledged, ${report.kills} kills, ${report.writesLost} lost`
  console.log(`crash loop: ${summary} (${report.killsDuringStartup} more during start-up, ${report.unansweredWrites} unanswered, ${report.durationMs} ms)`)
  expect([summary, report.lost]).toEqual([summary, []])
  expect([summary, report.unexpected]).toEqual([summary, []])
  expect(report.writesLost).toBe(0)
  expect(report.acknowledgedWrites).toBeGreaterThanOrEqual(5 * 40)
  expect(report.eventChecks).toBeGreaterThan(report.acknowledgedWrites) // every verification reads them all
  // Every kind of write was acknowledged at least once over the run.
  for (const operation of ['organization create', 'organization update', 'application create', 'consumer create', 'installation create', 'enrollment create', 'keyset create', 'token create']) {
    expect([operation, report.acknowledgedByOperation[operation] ?? 0]).not.toEqual([operation, 0])
  }
}, 60000)
