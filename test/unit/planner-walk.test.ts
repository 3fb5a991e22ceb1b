/**
 * A long list walk yields between chunks over the live index list it walks (src/storage/embedded/
 * planner.ts): records removed or added while it yields must neither shift it into skipping or
 * repeating a record, nor add records created after it began.
 */
import { expect, test } from 'bun:test'
import { createTables } from '../../src/store/tables'
import { listPage, WALK_CHUNK } from '../../src/storage/embedded/planner'
import type { Consumer } from '../../src/storage/records'
import { newSlice } from '../../src/ops/turns'
import { turnsDuring } from '../support/event-loop'

const ORG = 'org-1'
const COUNT = 4 * WALK_CHUNK

const consumer = (n: number): Consumer =>
  ({ consumer_id: `c${String(n).padStart(6, '0')}`, organization_id: ORG, state: n % 3 === 0 ? 'suspended' : 'active', created: n, modified: n }) as Consumer

test('removals and inserts while a walk yields: every remaining match once, nothing newer', async () => {
  const tables = createTables()
  for (let n = 1; n <= COUNT; n++) tables.consumers.put(consumer(n))
  const pending = listPage(tables, { table: 'consumers', scope: ORG, where: [{ field: 'state', in: ['active'] }], order: 'asc' })
  expect(pending).toBeInstanceOf(Promise)

  // The first chunk has been walked: remove records behind the walk and ahead of it, add newer ones.
  const removed = new Set<number>()
  for (const n of [2, 5, 100, WALK_CHUNK + 1, WALK_CHUNK + 2, 3 * WALK_CHUNK, COUNT]) {
    tables.consumers.remove(consumer(n).consumer_id)
    removed.add(n)
  }
  for (let n = COUNT + 1; n <= COUNT + 50; n++) tables.consumers.put(consumer(n))

  const page = await pending
  const expected: string[] = []
  for (let n = 1; n <= COUNT; n++) {
    // Behind the walk, a removed record was already counted; ahead of it, it is gone.
    if (consumer(n).state === 'active' && (!removed.has(n) || n <= WALK_CHUNK)) expected.push(consumer(n).consumer_id)
  }
  const ids = page.items.map((item) => item.consumer_id)
  expect(new Set(ids).size).toBe(ids.length)
  expect(ids).toEqual(expected)
  expect(page.total).toBe(expected.length)
})

test('walks running at once go on one chunk per turn of the event loop, in the line of long tasks (src/ops/turns.ts, nextTurn)', async () => {
  const tables = createTables()
  for (let n = 1; n <= COUNT; n++) tables.consumers.put(consumer(n))
  const walk = () => listPage(tables, { table: 'consumers', scope: ORG, where: [{ field: 'state', in: ['active'] }], order: 'asc' })
  // Another request's work, one per turn of the loop, counted against the walks' turns.
  let pages: Awaited<ReturnType<typeof walk>>[] = []
  const order = await turnsDuring(async () => {
    const walks = [walk(), walk(), walk()]
    for (const pending of walks) expect(pending).toBeInstanceOf(Promise)
    pages = await Promise.all(walks)
  })
  expect(new Set(pages.map((page) => page.total)).size).toBe(1)
  // Three walks of four chunks, the first of each at once: nine more chunks, each in a turn of its own.
  expect(order.length).toBeGreaterThanOrEqual(9)
})

test("walks take turns by tenant (the query's slice): one tenant's three walks do not hold another's back three times as long", async () => {
  const tables = createTables()
  for (let n = 1; n <= COUNT; n++) tables.consumers.put(consumer(n))
  const finished: string[] = []
  const walk = (tenant: string) =>
    Promise.resolve(listPage(tables, { table: 'consumers', scope: ORG, where: [{ field: 'state', in: ['active'] }], order: 'asc', slice: newSlice(tenant) })).then(() =>
      finished.push(tenant),
    )
  await Promise.all([walk('A'), walk('A'), walk('A'), walk('B')])
  // B's chunks alternate with those of A's first walk (A's go one after the other): B is done
  // second, where in one line of tasks it would be last.
  expect(finished).toEqual(['A', 'B', 'A', 'A'])
})
