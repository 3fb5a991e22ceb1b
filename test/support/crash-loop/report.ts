/** What a crash loop reports. */

export interface CrashLoopReport {
  readonly seed: number
  readonly kills: number
  /** Kills sent while a graceful stop (snapshot) was under way; some stops finished first. */
  readonly killsDuringShutdown: number
  readonly gracefulStopsFinished: number
  /** Extra kills during a restart's start-up, before it served anything. */
  readonly killsDuringStartup: number
  /** The compaction threshold the server ran with. */
  readonly compactAfterBytes: number
  /** Log segments seen over the run: each compaction or graceful stop starts a new one. */
  readonly segmentsSeen: number
  readonly acknowledgedWrites: number
  readonly acknowledgedByOperation: Record<string, number>
  /** Writes cut off by a kill: no answer, so either outcome is allowed. */
  readonly unansweredWrites: number
  /** Of those, the ones found done after the restart. */
  readonly unansweredFoundDone: number
  /** Audit events read back and compared with the records, over all verifications. */
  readonly eventChecks: number
  /** Records whose latest acknowledged state was not found after a restart: must be 0. */
  readonly writesLost: number
  /** What was lost or appeared from nowhere, one line each (empty when all is well). */
  readonly lost: string[]
  /** Answers that were not what the model predicted (a 4xx/5xx for a valid write): must be empty. */
  readonly unexpected: string[]
  /** Restarts that dropped a torn last log record (with the warning the contract asks for). */
  readonly tornTailWarnings: number
  readonly recordsAtEnd: number
  readonly recordChecks: number
  readonly durationMs: number
}
