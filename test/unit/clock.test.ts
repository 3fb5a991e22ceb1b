import { expect, test } from 'bun:test'
import { advanceClockPast, formatTimestamp, nowMicros } from '../../src/store/clock'

/** The format spelled out from scratch, to check the cached fast path against. */
function reference(micros: number): string {
  const d = new Date(Math.floor(micros / 1000))
  const pad = (n: number, width = 2) => String(n).padStart(width, '0')
  const date = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`
  const time = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`
  return `${date} ${time}.${pad(micros % 1_000_000, 6)} +00:00`
}

test('formatTimestamp matches the reference format, across seconds, days and years', () => {
  const samples = [0, 999_999, 1_000_000, 1_798_761_599_999_999, 1_798_761_600_000_000, 951_782_400_000_001]
  let seed = 12345
  for (let i = 0; i < 2000; i++) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31
    samples.push(1_700_000_000_000_000 + seed * 1000 + (seed % 1000))
  }
  // Runs within one second (the date and time formatted once are reused), then the second before and back.
  const second = 1_764_000_000_000_000
  for (const offset of [1, 2, 999_999, -1, 500_000, 1_000_000, 1_000_001, 3]) samples.push(second + offset)
  for (const micros of samples) expect(formatTimestamp(micros)).toBe(reference(micros))
})

test('nowMicros strictly increases, also after the clock is advanced past a stored timestamp', () => {
  let last = nowMicros()
  for (let i = 0; i < 10_000; i++) {
    const next = nowMicros()
    expect(next).toBeGreaterThan(last)
    last = next
  }
  const future = last + 3_600_000_000
  advanceClockPast(future)
  expect(nowMicros()).toBeGreaterThan(future)
})
