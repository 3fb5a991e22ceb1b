/**
 * One request's wait for the database in database mode (src/storage/postgres/request-wait.ts): its
 * steps share one timeout, and steps side by side are charged once for the time they overlap.
 */
import { expect, test } from 'bun:test'
import { waitedFor, withRequestWait } from '../../src/storage/postgres/request-wait'
import { DatabaseUnavailableError } from '../../src/storage/postgres/errors'

/** A step that the database answers `ms` later (a stand-in for a statement's round trip). */
const answeredAfter = (ms: number) => () => new Promise<number>((resolve) => setTimeout(() => resolve(ms), ms))
/** A step answered at once, resolving with the time it was given. */
const given = (left: number) => Promise.resolve(left)

test('steps one after another share the timeout: the next one has what is left, and none once it is spent', async () => {
  const [left, spent] = await withRequestWait(async () => {
    await waitedFor(1000, answeredAfter(600))
    const left = await waitedFor(1000, given)
    await waitedFor(1000, answeredAfter(500)).catch(() => {})
    return [left, await waitedFor(1000, given).catch((error) => error)]
  })
  expect(left).toBeLessThanOrEqual(400)
  expect(spent).toBeInstanceOf(DatabaseUnavailableError)
})

test('steps side by side are charged once for the time they overlap, not each', async () => {
  const left = await withRequestWait(async () => {
    // Three lookups at once of 400 ms: 400 ms waited, not 1,200 (which would leave nothing).
    await Promise.all([1, 2, 3].map(() => waitedFor(1000, answeredAfter(400))))
    return waitedFor(1000, given)
  })
  expect(left).toBeGreaterThan(0)
  expect(left).toBeLessThanOrEqual(600)
})

test('outside a request (the CLI, background work) every step has the whole timeout', async () => {
  await waitedFor(1000, answeredAfter(600))
  expect(await waitedFor(1000, given)).toBe(1000)
})
