/**
 * Audit retention (docs/api.md "Audit events"; README "Audit trail"): a background loop of the server drops
 * events older than the retention period, a small batch at a time, each batch its own durable change
 * (`Storage.purgeAuditEvents`), with a turn of the event loop in between. Never in a request's path.
 */
import type { Storage } from '../../storage/storage'
import type { Logger } from '../../ops/logger'

/** Events per change: a log record of about 40 KiB, a moment of the store's queue. */
export const RETENTION_BATCH = 1000

/** A pass of retention: the events it has dropped so far (each batch counted once durable), and whether to end it. */
export interface RetentionPass {
  dropped: number
  stopping: boolean
}

/**
 * Drops every event older than `before` (microseconds), `batch` at a time, until none is left or
 * `pass.stopping` is set (it ends after the batch under way); resolves with how many it dropped.
 */
export async function dropEventsBefore(storage: Storage, before: number, batch = RETENTION_BATCH, pass: RetentionPass = { dropped: 0, stopping: false }): Promise<number> {
  for (;;) {
    const count = await storage.purgeAuditEvents(before, batch)
    pass.dropped += count
    if (count < batch || pass.stopping) return pass.dropped
    await new Promise<void>((resolve) => setImmediate(resolve))
  }
}

export interface AuditRetention {
  /**
   * Ends the loop: the pass under way ends after its batch, and the rest waits for the next start.
   * A backlog of half a million events held a stop for 40 s, past `--stop-timeout` (found in review, 2026-11-30).
   */
  stop(): Promise<void>
}

/** A pass at once, then every quarter of the retention period (at least a second, at most ten minutes). */
export function startAuditRetention(storage: Storage, retentionSeconds: number, logger: Logger): AuditRetention {
  const intervalMs = Math.min(Math.max((retentionSeconds * 1000) / 4, 1000), 10 * 60 * 1000)
  let running: Promise<void> | null = null
  let current: RetentionPass | null = null
  const pass = () => {
    if (running) return // the last pass is still at it
    const progress: RetentionPass = (current = { dropped: 0, stopping: false })
    // By the storage's clock, which stamped the events (in database mode the database's), not by
    // this machine's system clock. No event is older than 1970: a retention reaching past it drops
    // nothing (and PostgreSQL's bigint could not hold the time).
    running = dropEventsBefore(storage, Math.max(0, storage.now() - retentionSeconds * 1_000_000), RETENTION_BATCH, progress)
      .then(
        (dropped) => (dropped > 0 ? logger.info(`audit retention: dropped ${dropped} event(s) older than ${retentionSeconds} s`, { dropped }) : undefined),
        // What the pass dropped before it failed is durable: counted here, or the log's counts fall short of what went.
        (error) => logger.error('audit retention failed, will retry', { error: (error as Error)?.message ?? String(error), dropped: progress.dropped }),
      )
      .finally(() => ((running = null), (current = null)))
  }
  pass()
  const timer = setInterval(pass, intervalMs)
  timer.unref()
  return {
    stop: async () => {
      clearInterval(timer)
      if (current) current.stopping = true
      await running
    },
  }
}
