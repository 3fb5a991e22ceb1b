/**
 * The embedded store's clock (docs/storage.md, "Embedded"): microseconds of real time that never go
 * back. It runs on the monotonic clock, so the durations it measures are real whatever happens to
 * the system clock; it follows the system clock when that steps forward (an NTP correction, a host
 * resumed from suspend), and runs on when it steps back, ahead of it by that step. Records are
 * stamped with it (`nowMicros`: strictly increasing, so every record's `modified` strictly
 * increases with each change even when two writes share a microsecond), and token expiry and audit
 * retention are judged on it (`currentMicros`): so a token lives its ttl, an expired one stays
 * expired, and an event is dropped at its age, whatever the system clock does meanwhile.
 */
export class Clock {
  /** This clock's microseconds at the monotonic clock's 0: the system clock's at start, moved forward with it. */
  private origin: number
  /** The last timestamp handed out. */
  private last = 0

  constructor(
    /** The system clock, in milliseconds since the epoch. */
    private readonly wallMs: () => number = Date.now,
    /** The monotonic clock, in milliseconds, and where the system clock stood at its 0. */
    private readonly monotonicMs: () => number = () => performance.now(),
    originMs: number = performance.timeOrigin,
  ) {
    this.origin = originMs * 1000
  }

  private read(): number {
    const elapsed = this.monotonicMs() * 1000
    const wall = this.wallMs() * 1000
    // Over a millisecond behind the system clock (read to the millisecond): it stepped forward.
    if (wall - (this.origin + elapsed) > 1000) this.origin = wall - elapsed
    return Math.floor(this.origin + elapsed)
  }

  /** A new timestamp, after every one handed out before. */
  stamp(): number {
    const now = this.read()
    this.last = now > this.last ? now : this.last + 1
    return this.last
  }

  /** The time now, never before a timestamp handed out. */
  now(): number {
    const now = this.read()
    return now > this.last ? now : this.last
  }

  /** After recovery: a stored timestamp ahead of the clock (the system clock was set back since) moves it forward, to run on from there. */
  advancePast(micros: number): void {
    if (micros > this.last) this.last = micros
    const behind = micros - this.read()
    if (behind > 0) this.origin += behind
  }
}

/** The process's clock: one for every store of the process. */
const clock = new Clock()

export const nowMicros = (): number => clock.stamp()
export const currentMicros = (): number => clock.now()
export const advanceClockPast = (micros: number): void => clock.advancePast(micros)

/** `YYYY-MM-DD HH:MM:SS.ffffff +00:00` (docs/api.md "Conventions"). */
export function formatTimestamp(micros: number): string {
  let text = formatted.get(micros)
  if (text === undefined) {
    const seconds = Math.floor(micros / 1_000_000)
    if (seconds !== secondsOfPrefix) {
      const iso = new Date(seconds * 1000).toISOString() // 2026-11-22T13:39:10.000Z
      prefix = `${iso.slice(0, 10)} ${iso.slice(11, 19)}.`
      secondsOfPrefix = seconds
    }
    text = `${prefix}${String(micros - seconds * 1_000_000).padStart(6, '0')} +00:00`
    if (formatted.size >= FORMATTED_CACHE_SIZE) formatted.clear()
    formatted.set(micros, text)
  }
  return text
}

/** The date and time of the last second formatted: the changes of a second share it. */
let secondsOfPrefix = NaN
let prefix = ''

/**
 * Recently formatted timestamps: every read formats two, and the records read most are read again.
 * Cleared when full, which is cheaper than tracking recency and costs one miss per entry.
 */
const formatted = new Map<number, string>()
const FORMATTED_CACHE_SIZE = 1 << 16
