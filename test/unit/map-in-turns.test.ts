/**
 * `mapInTurns` (src/storage/storage.ts): a big answer is built in turns of the event loop, so other
 * requests are served between them (docs/security.md, "Big answers"); a small one stays synchronous.
 */
import { expect, test } from 'bun:test'
import { mapInTurns, TURN_BUDGET_MS } from '../../src/storage/storage'

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
