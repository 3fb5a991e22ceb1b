/**
 * Audit retention (docs/api.md "Audit events"; README "Audit trail"): a background loop of the server drops
 * events older than the retention period, a small batch at a time, each batch its own durable change
 * (`Storage.purgeAuditEvents`), with a turn of the event loop in between. Never in a request's path.
 */
import type { Storage } from '../../storage/storage'
import type { Logger } from '../../ops/logger'

/** Events per change: a log record of about 40 KiB, a moment of the store's queue. */
export const RETENTION_BATCH = 1000

/** Drops every event older than `before` (microseconds), `batch` at a time; resolves with how many. */
export async function dropEventsBefore(storage: Storage, before: number, batch = RETENTION_BATCH): Promise<number> {
  let dropped = 0
  for (;;) {
    const count = await storage.purgeAuditEvents(before, batch)
    dropped += count
    if (count < batch) return dropped
    await new Promise<void>((resolve) => setImmediate(resolve))
  }
}

export interface AuditRetention {
  /** Ends the loop, once the pass under way (if any) is done. */
  stop(): Promise<void>
}

/** A pass at once, then every quarter of the retention period (at least a second, at most ten minutes). */
export function startAuditRetention(storage: Storage, retentionSeconds: number, logger: Logger): AuditRetention {
  const intervalMs = Math.min(Math.max((retentionSeconds * 1000) / 4, 1000), 10 * 60 * 1000)
  let running: Promise<void> | null = null
  const pass = () => {
    if (running) return // the last pass is still at it
    // By the storage's clock, which stamped the events (in database mode the database's), not by
    // this machine's system clock. No event is older than 1970: a retention reaching past it drops
    // nothing (and PostgreSQL's bigint could not hold the time).
    running = dropEventsBefore(storage, Math.max(0, storage.now() - retentionSeconds * 1_000_000))
      .then(
        (dropped) => (dropped > 0 ? logger.info(`audit retention: dropped ${dropped} event(s) older than ${retentionSeconds} s`, { dropped }) : undefined),
        (error) => logger.error('audit retention failed, will retry', { error: (error as Error)?.message ?? String(error) }),
      )
      .finally(() => (running = null))
  }
  pass()
  const timer = setInterval(pass, intervalMs)
  timer.unref()
  return {
    stop: async () => {
      clearInterval(timer)
      await running
    },
  }
}
