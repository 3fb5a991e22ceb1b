import { describe, expect, test } from 'bun:test'
import { advanceClockPast, Clock, formatTimestamp, nowMicros } from '../../src/store/clock'

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

/** A clock on a system clock and a monotonic clock that the test moves (milliseconds). */
function clockAt(wallMs: number) {
  const time = { wall: wallMs, monotonic: 0 }
  const clock = new Clock(() => time.wall, () => time.monotonic, wallMs)
  /** Real time passing: both clocks move. */
  const pass = (ms: number) => ((time.wall += ms), (time.monotonic += ms))
  /** The system clock set (an NTP step, an operator): only it moves. */
  const step = (ms: number) => (time.wall += ms)
  return { clock, pass, step }
}

const DAY_MS = 86_400_000
const START_MS = 1_780_000_000_000

describe('the clock (docs/storage.md "Embedded")', () => {
  test('measures real time: a system clock set back changes neither its time nor the durations it measures', () => {
    const { clock, pass, step } = clockAt(START_MS)
    const before = clock.stamp()
    step(-DAY_MS)
    pass(45_000)
    // 45 s later by the clock, whatever the system clock says: a 45 s token issued at `before` has expired.
    expect(clock.now() - before).toBe(45_000_000)
    expect(clock.stamp()).toBeGreaterThan(before)
  })

  test('follows the system clock when it steps forward, and keeps counting real time from there', () => {
    const { clock, pass, step } = clockAt(START_MS)
    clock.stamp()
    step(DAY_MS)
    expect(clock.now()).toBe((START_MS + DAY_MS) * 1000)
    pass(12)
    expect(clock.stamp()).toBe((START_MS + DAY_MS + 12) * 1000)
  })

  test('a stored time ahead of it (the system clock was set back since): it runs on from there at real speed, not one microsecond per stamp', () => {
    const { clock, pass } = clockAt(START_MS)
    const stored = (START_MS + DAY_MS) * 1000
    clock.advancePast(stored)
    const first = clock.stamp()
    expect(first).toBeGreaterThan(stored)
    pass(2000)
    expect(clock.stamp() - stored).toBe(2_000_000)
  })

  test('stamps strictly increase within a microsecond; now() is never before the last stamp', () => {
    const { clock } = clockAt(START_MS)
    const stamps = Array.from({ length: 5 }, () => clock.stamp())
    expect(stamps).toEqual([0, 1, 2, 3, 4].map((i) => START_MS * 1000 + i))
    expect(clock.now()).toBe(stamps[4]!)
  })
})
