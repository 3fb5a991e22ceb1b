/** The load run's leak judge (test/support/load/memory.ts): the audit trail's growth is by design, anything above it is not. */
import { expect, test } from 'bun:test'
import { analyseMemory, AUDIT_EVENT_BUDGET_BYTES, type MemorySample } from '../support/load'

const MiB = 2 ** 20
/** 60 one-second samples: a base of 200 MiB, `eventsPerSecond` audit events a second, and what else grows a minute. */
function samples(eventsPerSecond: number, bytesPerEvent: number, otherMiBPerMinute: number): MemorySample[] {
  return Array.from({ length: 60 }, (_, t) => {
    const events = eventsPerSecond * t
    return [t, 200 * MiB + events * bytesPerEvent + (otherMiBPerMinute * MiB * t) / 60, events] as const
  })
}

test('a trail of events within their budget is not a leak, though the raw RSS grows', () => {
  const m = analyseMemory(samples(2_000, 210, 0), 13_000)
  expect(m.rawSlopeMiBPerMin).toBeGreaterThan(24)
  expect(m.growing).toBe(false)
  expect([m.auditEventsFirst, m.auditEventsLast]).toEqual([0, 118_000])
})

test('growth beyond the trail is a leak; so is a trail over its budget', () => {
  expect(analyseMemory(samples(2_000, 210, 40), 13_000).growing).toBe(true)
  expect(analyseMemory(samples(2_000, AUDIT_EVENT_BUDGET_BYTES * 2, 0), 13_000).growing).toBe(true)
  expect(analyseMemory(samples(0, 0, 40), 13_000).growing).toBe(true)
})

test('a sample whose event count was not read keeps the count before it; too few samples are not judged', () => {
  const some = samples(2_000, 210, 0).map(([t, rss, events]) => [t, rss, t % 7 === 3 ? null : events] as const)
  expect(analyseMemory(some, 13_000).growing).toBe(false)
  expect(analyseMemory(samples(2_000, 210, 0).slice(0, 10), 13_000).growing).toBeNull()
})
