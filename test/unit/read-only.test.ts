/**
 * Reading a data dir beside a store that writes and compacts it (src/store/read-only.ts): a read
 * overlapping a compaction is done again, damage in a dir that changed meanwhile is read again, damage
 * in a dir that did not change is reported at once, and what a read returns holds every record
 * committed before it began.
 */
import { afterEach, expect, test } from 'bun:test'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { Store } from '../../src/store/store.ts'
import { readConsistently, readDataDir } from '../../src/store/read-only.ts'
import { isDamageError } from '../../src/store/recovery.ts'
import { LogDamageError } from '../../src/store/log-format.ts'

const dirs: string[] = []
const stores: Store[] = []
afterEach(async () => {
  for (const store of stores.splice(0)) await store.close().catch(() => {})
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

const consumer = (n: number) => ({ consumer_id: `c${n}`, organization_id: 'org', state: 'active' as const, created: n, modified: n })

/** A store with `count` consumers, each committed alone, and a snapshot in the middle. */
async function storeWith(count: number): Promise<{ dir: string; store: Store }> {
  const dir = tempDir('keyward-read-only-')
  dirs.push(dir)
  const store = await Store.open(dir, { log: () => {} })
  stores.push(store)
  for (let n = 1; n <= count; n++) {
    await store.commit((tx) => tx.put('consumers', consumer(n)))
    if (n === Math.floor(count / 2)) await store.compact()
  }
  return { dir, store }
}

test('a read during which a compaction replaced the snapshot is done again', async () => {
  const { dir, store } = await storeWith(6)
  let calls = 0
  const result = await readConsistently(dir, async () => {
    const read = await readDataDir(dir)
    if (++calls === 1) {
      await store.commit((tx) => tx.put('consumers', consumer(7)))
      await store.compact() // a new snapshot; the segments read are deleted
    }
    return read
  })
  expect(result.reads).toBe(2)
  expect(result.value.tables.consumers.size).toBe(7)
})

test('appends during a read do not make it read again (the snapshot is what matters)', async () => {
  const { dir, store } = await storeWith(4)
  const result = await readConsistently(dir, async () => {
    const read = await readDataDir(dir)
    await store.commit((tx) => tx.put('consumers', consumer(5)))
    return read
  })
  expect(result.reads).toBe(1)
})

test('damage seen while the dir changed is read again; damage in a dir that did not change is reported at once', async () => {
  const { dir, store } = await storeWith(4)
  let calls = 0
  const retried = await readConsistently(dir, async () => {
    if (++calls === 1) {
      await store.commit((tx) => tx.put('consumers', consumer(5))) // the dir changes...
      throw new LogDamageError(join(dir, 'wal-x.log'), 0, 'an append seen half copied')
    }
    return readDataDir(dir)
  })
  expect(retried.reads).toBe(2)

  await store.close()
  const snapshot = join(dir, 'snapshot.json')
  const bytes = readFileSync(snapshot)
  bytes[30] = bytes[30]! ^ 0x5a
  writeFileSync(snapshot, bytes)
  let reads = 0
  const error = await readConsistently(dir, () => {
    reads++
    return readDataDir(dir)
  }).catch((e: unknown) => e)
  expect(isDamageError(error)).toBe(true)
  expect(reads).toBe(1)
})

test('a dir that changed under every read is said to have changed, not to be damaged', async () => {
  const { dir, store } = await storeWith(1)
  let reads = 0
  const error = await readConsistently(dir, async () => {
    reads++
    await store.commit((tx) => tx.put('consumers', consumer(100 + reads))) // the dir changes...
    throw new LogDamageError(join(dir, 'wal-x.log'), 0, 'an append seen half copied')
  }).catch((e: unknown) => e)
  expect(reads).toBe(10)
  expect((error as Error).message).toBe(`data dir ${dir} changed under each of 10 reads (compacted or written to meanwhile): try again`)
  await store.close()
})

test('reads overlapping compactions hold every record committed before they began', async () => {
  const { dir, store } = await storeWith(0)
  let committed = 0
  for (let round = 1; round <= 20; round++) {
    await store.commit((tx) => {
      for (let i = 0; i < 100; i++) tx.put('consumers', consumer(++committed))
    })
    const before = committed
    const [, contents] = await Promise.all([store.compact(), readDataDir(dir)])
    for (let n = 1; n <= before; n++) expect(contents.tables.consumers.has(`c${n}`)).toBe(true)
    expect(contents.recovered.lastLsn).toBe(round) // one commit a round
  }
})
