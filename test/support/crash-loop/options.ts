/** What a crash loop is asked to do, and the defaults of what is left out. */

export interface CrashLoopOptions {
  readonly dataDir: string
  readonly kills: number
  /** Concurrent clients (default 24). */
  readonly clients?: number
  /** Writes acknowledged in a round before its kill is timed (default 0: none waited for). */
  readonly acknowledgedBeforeKill?: number
  /** The kill comes this long after the restarted server listens (after `acknowledgedBeforeKill`): uniform in [min, max] ms. */
  readonly minKillDelayMs?: number
  readonly maxKillDelayMs?: number
  /** Share of kills that land during a graceful stop (SIGTERM first, SIGKILL 0-40 ms later). */
  readonly gracefulShare?: number
  /** Share of restarts killed at a random instant during start-up (0-150 ms after spawning) first. */
  readonly startupKillShare?: number
  /** The server compacts when its log segment passes this many bytes (KEYWARD_COMPACT_AFTER_BYTES). */
  readonly compactAfterBytes?: number
  /** For a reproducible sequence of operations and delays (default: random, and reported). */
  readonly seed?: number
  readonly log?: (line: string) => void
}

export function options(o: CrashLoopOptions) {
  return {
    clients: o.clients ?? 24,
    acknowledgedBeforeKill: o.acknowledgedBeforeKill ?? 0,
    minKillDelayMs: o.minKillDelayMs ?? 50,
    maxKillDelayMs: o.maxKillDelayMs ?? 600,
    gracefulShare: o.gracefulShare ?? 0.2,
    startupKillShare: o.startupKillShare ?? 0.15,
    compactAfterBytes: o.compactAfterBytes ?? 256 * 1024,
  }
}
