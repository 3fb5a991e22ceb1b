/**
 * The audit retention loop (src/modules/audit/retention.ts) against a storage with a backlog: a stop
 * ends the pass under way after its batch, and a pass that fails reports what it dropped before.
 */
import { expect, test } from 'bun:test'
import { RETENTION_BATCH, startAuditRetention } from '../../src/modules/audit/retention'
import { memoryLogger } from '../../src/ops/logger'
import type { Storage } from '../../src/storage/storage'

/** A storage whose events to drop come in full batches, `batches` of them, then fail if `failing`. */
function backlogStorage(batches: number, failing = false) {
  let purges = 0
  const storage = {
    now: () => 1_000_000_000_000,
    purgeAuditEvents: async (_before: number, limit: number) => {
      purges++
      if (purges > batches) {
        if (failing) throw new Error('the database cannot be reached')
        return 0
      }
      return limit
    },
  } as unknown as Storage
  return { storage, purges: () => purges }
}

test('a stop ends the pass under way after its batch: a backlog does not hold it', async () => {
  const { storage, purges } = backlogStorage(500)
  const logger = memoryLogger()
  await startAuditRetention(storage, 60, logger).stop()
  expect(purges()).toBe(1)
  expect(logger.entries.map((entry) => [entry.msg, entry.fields.dropped])).toEqual([['audit retention: dropped 1000 event(s) older than 60 s', RETENTION_BATCH]])
})

test('a pass that fails says how many events it dropped before (they stay dropped)', async () => {
  const { storage } = backlogStorage(3, true)
  const logger = memoryLogger()
  const retention = startAuditRetention(storage, 60, logger)
  // The pass at the start runs to its failure unless stopped: let it, then stop.
  for (let i = 0; i < 20 && logger.entries.length === 0; i++) await new Promise<void>((resolve) => setImmediate(resolve))
  await retention.stop()
  expect(logger.entries.map((entry) => [entry.level, entry.msg, entry.fields.dropped])).toEqual([['error', 'audit retention failed, will retry', 3 * RETENTION_BATCH]])
})
