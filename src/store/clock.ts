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

/** `YYYY-MM-DD HH:MM:SS.ffffff +00:00` (SPEC.md timestamp format). */
export function formatTimestamp(micros: number): string {
  const seconds = Math.floor(micros / 1_000_000)
  let prefix = secondPrefixes.get(seconds)
  if (prefix === undefined) {
    const iso = new Date(seconds * 1000).toISOString() // 2026-11-22T13:39:10.000Z
    prefix = `${iso.slice(0, 10)} ${iso.slice(11, 19)}.`
    if (secondPrefixes.size >= 4096) secondPrefixes.clear()
    secondPrefixes.set(seconds, prefix)
  }
  return `${prefix}${String(micros - seconds * 1_000_000).padStart(6, '0')} +00:00`
}

/** `YYYY-MM-DD HH:MM:SS.` by whole second (every read formats two timestamps; Date is the costly part). */
const secondPrefixes = new Map<number, string>()
