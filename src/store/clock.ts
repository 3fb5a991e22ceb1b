/**
 * Microsecond wall-clock timestamps that strictly increase across the whole process, so every
 * record's `modified` strictly increases with each change even when two writes share a microsecond
 * or the system clock steps back.
 */
let last = 0

export function nowMicros(): number {
  const wall = Math.floor((performance.timeOrigin + performance.now()) * 1000)
  last = wall > last ? wall : last + 1
  return last
}

/** After recovery: never hand out a timestamp at or below one already stored. */
export function advanceClockPast(micros: number): void {
  if (micros > last) last = micros
}

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
