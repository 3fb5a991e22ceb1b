/**
 * `mapInTurns` (src/ops/turns.ts): a big answer is built in turns of the event loop, so other
 * requests are served between them (docs/security.md, "Big answers"); a small one stays synchronous.
 */
import { expect, test } from 'bun:test'
import { then } from '../../src/storage/storage'
import { mapInTurns, newSlice, nextTurn, TURN_BUDGET_MS, type Slice } from '../../src/ops/turns'
import { turnsDuring } from '../support/event-loop'

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

/** 64 items of a big answer, 16 to a slice (the clock is read every 16): four slices, each logged as `name`. */
const bigStage = (name: string, log: (name: string) => void, slice?: Slice) =>
  mapInTurns(
    Array.from({ length: 64 }, (_, i) => i),
    (i) => {
      busy(TURN_BUDGET_MS / 12)
      if (i % 16 === 0) log(name)
      return i
    },
    slice,
  )

/** Never two slices of long work (any name but 'turn') in one turn of the loop. */
function expectOneSlicePerTurn(order: readonly string[]): void {
  for (let i = 1; i < order.length; i++) expect([i, order[i - 1] !== 'turn', order[i] !== 'turn']).not.toEqual([i, true, true])
}

test('long tasks running at once go on one per turn of the event loop: another request waits for one slice, not one of each', async () => {
  const order = await turnsDuring((log) => Promise.all(['A', 'B', 'C'].map((name) => bigStage(name, log))))
  expectOneSlicePerTurn(order)
  // The first task's three later slices and the others' four (their first waited in line: a task
  // was waiting), each in a turn of its own.
  expect(order.filter((entry) => entry !== 'turn')).toHaveLength(11)
})

test("one task's stages share its slice: the next stage starts within what the last one left, or in the task's next turn", async () => {
  // A big answer's texts, then its bytes (listAnswer, then JsonBytes): one slice for both.
  const task = (log: (name: string) => void) => {
    const slice = newSlice()
    return then(bigStage('texts', log, slice), () => bigStage('bytes', log, slice))
  }
  const order = await turnsDuring((log) => Promise.all([task(log), task(log)]))
  expectOneSlicePerTurn(order)
  expect(order.filter((entry) => entry === 'bytes')).toHaveLength(8)
})

test("tenants take turns: one tenant's many long tasks slow another tenant's as one would", async () => {
  // Tenant A starts three big answers, then tenant B one, of four slices each: the first's first
  // slice runs at once, the others' wait in line.
  const order = await turnsDuring((log) =>
    Promise.all([...['A', 'A', 'A'].map((name) => bigStage(name, log, newSlice('tenant A'))), bigStage('B', log, newSlice('tenant B'))]),
  )
  expectOneSlicePerTurn(order)
  const slices = order.filter((entry) => entry !== 'turn')
  expect(slices).toHaveLength(15)
  // Every other turn is B's until it is done: its four slices among the first eight, not one in four.
  expect(slices.slice(0, 8)).toEqual(['A', 'B', 'A', 'B', 'A', 'B', 'A', 'B'])
})

test("a tenant's tasks are finished one after the other, not all advanced together: what they hold unfinished is one task's", async () => {
  const tenant = newSlice('tenant A').tenant
  const order = await turnsDuring((log) => Promise.all(['A1', 'A2', 'A3'].map((name) => bigStage(name, log, newSlice(tenant)))))
  expectOneSlicePerTurn(order)
  // After the first task's first slice (run as it started), its three others in a row, then each
  // other task's four (their first waited in line).
  expect(order.filter((entry) => entry !== 'turn')).toEqual(['A1', 'A1', 'A1', 'A2', 'A2', 'A2', 'A2', 'A3', 'A3', 'A3', 'A3'])
})

test("a task given its turn by nextTurn (a list's walk) goes on to its next stage within that turn's slice, not back in line", async () => {
  const log: string[] = []
  // Tenant B's big answer keeps a task waiting in line the whole time.
  const other = bigStage('B', (name) => log.push(name), newSlice('tenant B'))
  const walked = newSlice('tenant A')
  await nextTurn(walked) // a walk's chunk, in tenant A's turn
  const answer = mapInTurns([1, 2, 3], (n) => n, walked)
  expect(answer).toEqual([1, 2, 3]) // made in the same turn: not a promise
  await other
})
