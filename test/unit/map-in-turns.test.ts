/**
 * `mapInTurns` (src/storage/storage.ts): a big answer is built in turns of the event loop, so other
 * requests are served between them (docs/security.md, "Big answers"); a small one stays synchronous.
 */
import { expect, test } from 'bun:test'
import { mapInTurns, newSlice, then, TURN_BUDGET_MS } from '../../src/storage/storage'

/** Work that takes `ms` of the clock, as building a big record's text does. */
function busy(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until);
}

test('what fits in one turn is mapped synchronously, in order', () => {
  const mapped = mapInTurns([1, 2, 3], (n) => n * 2)
  expect(mapped).toEqual([2, 4, 6])
})

test('what takes longer gives the event loop back between turns, and keeps its order', async () => {
  const items = Array.from({ length: 64 }, (_, i) => i)
  const ranMeanwhile: number[] = []
  let mappedSoFar = 0
  // Another request's work, queued before the mapping starts: it must not wait for all of it.
  setImmediate(() => ranMeanwhile.push(mappedSoFar))
  const mapped = mapInTurns(items, (n) => {
    busy(TURN_BUDGET_MS / 4)
    mappedSoFar++
    return n + 1
  })
  expect(mapped).toBeInstanceOf(Promise)
  expect(await mapped).toEqual(items.map((n) => n + 1))
  expect(ranMeanwhile).toHaveLength(1)
  expect(ranMeanwhile[0]!).toBeGreaterThan(0)
  expect(ranMeanwhile[0]!).toBeLessThan(items.length)
})

test('long tasks running at once go on one per turn of the event loop: another request waits for one slice, not one of each', async () => {
  const order: string[] = []
  let turns = 0
  let stopped = false
  // Another request's work, one per turn of the loop, while three big answers are built.
  const loopTurns = () => {
    if (stopped) return
    turns++
    order.push('turn')
    setImmediate(loopTurns)
  }
  setImmediate(loopTurns)
  const task = (name: string) =>
    mapInTurns(
      Array.from({ length: 64 }, (_, i) => i),
      (i) => {
        // A slice is 16 items (the clock is read every 16): four slices each.
        busy(TURN_BUDGET_MS / 12)
        if (i % 16 === 0) order.push(name)
        return i
      },
    )
  const built = await Promise.all([task('A'), task('B'), task('C')])
  stopped = true
  expect(built.map((items) => items.length)).toEqual([64, 64, 64])
  // After the first slices (run as each task started), never two slices in one turn of the loop.
  const afterStart = order.slice(order.indexOf('turn'))
  for (let i = 1; i < afterStart.length; i++) expect([afterStart[i - 1], afterStart[i]]).not.toEqual([expect.stringMatching(/^[ABC]$/), expect.stringMatching(/^[ABC]$/)])
  // Each task's three later slices, each in a turn of its own.
  expect(afterStart.filter((entry) => entry !== 'turn')).toHaveLength(9)
  expect(turns).toBeGreaterThanOrEqual(9)
})

test("one task's stages share its slice: the next stage starts within what the last one left, or in the task's next turn", async () => {
  const order: string[] = []
  let stopped = false
  const loopTurns = () => {
    if (stopped) return
    order.push('turn')
    setImmediate(loopTurns)
  }
  setImmediate(loopTurns)
  // A big answer's texts, then its bytes (listAnswer, then JsonBytes): one slice for both.
  const stage = (name: string, slice: ReturnType<typeof newSlice>) =>
    mapInTurns(
      Array.from({ length: 64 }, (_, i) => i),
      (i) => {
        busy(TURN_BUDGET_MS / 12)
        if (i % 16 === 0) order.push(name)
        return i
      },
      slice,
    )
  const task = () => {
    const slice = newSlice()
    return then(stage('texts', slice), () => stage('bytes', slice))
  }
  await Promise.all([task(), task()])
  stopped = true
  // Never two slices in one turn of the loop after the start, a stage's end and the next's start included.
  const afterStart = order.slice(order.indexOf('turn'))
  for (let i = 1; i < afterStart.length; i++) expect([i, afterStart[i - 1], afterStart[i]]).not.toEqual([i, expect.stringMatching(/^(texts|bytes)$/), expect.stringMatching(/^(texts|bytes)$/)])
  expect(afterStart.filter((entry) => entry === 'bytes')).toHaveLength(8)
})
