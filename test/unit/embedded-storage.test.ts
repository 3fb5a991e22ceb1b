/**
 * The embedded implementation of the storage interface (src/storage/embedded/index.ts), what the
 * HTTP tests do not reach: its transactions' own promises (docs/storage.md, "The interface" and
 * "What each implementation promises").
 */
import { afterEach, expect, test } from 'bun:test'
import { rmSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { tempDir } from '../support/temp-dirs'
import { Store } from '../../src/store/store'
import { StorageUnavailableError } from '../../src/store/wal'
import { EmbeddedStorage } from '../../src/storage/embedded'
import { UniqueViolation, type Fresh } from '../../src/storage/storage'
import { freshEvent } from '../support/postgres-storage'

const opened: { storage: EmbeddedStorage; dir: string }[] = []
afterEach(async () => {
  for (const { storage, dir } of opened.splice(0)) {
    await storage.close().catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  }
})

async function openStorage(): Promise<{ storage: EmbeddedStorage; store: Store }> {
  const dir = tempDir('keyward-embedded-')
  const store = await Store.open(dir, { log: () => {} })
  const storage = new EmbeddedStorage(store)
  opened.push({ storage, dir })
  return { storage, store }
}

const consumer = (): Fresh<'consumers'> => ({ consumer_id: crypto.randomUUID(), organization_id: crypto.randomUUID(), state: 'active' })

test("an enrollment whose (consumer, installation, application, environment) is another's is refused by the insert itself: UniqueViolation('enrollment_tuple')", async () => {
  const { storage } = await openStorage()
  const tuple = { organization_id: crypto.randomUUID(), consumer_id: crypto.randomUUID(), installation_id: crypto.randomUUID(), application_id: crypto.randomUUID(), environment: 'prod' }
  const enrollment = (): Fresh<'enrollments'> => ({ enrollment_id: crypto.randomUUID(), ...tuple, active_keyset_id: null, client_enclave_key: null, state: 'active' })
  await storage.transaction(async (tx) => tx.insert('enrollments', enrollment()))
  const second = storage.transaction(async (tx) => tx.insert('enrollments', enrollment()))
  await expect(second).rejects.toBeInstanceOf(UniqueViolation)
  await expect(second).rejects.toMatchObject({ rule: 'enrollment_tuple' })
})

test("tx.find sees the transaction's own writes, and tx.update changes a record it inserted", async () => {
  const { storage } = await openStorage()
  const fresh = consumer()
  const seen = await storage.transaction(async (tx) => {
    await tx.insert('consumers', fresh)
    const found = await tx.find('consumers', fresh.consumer_id)
    await tx.update('consumers', fresh.consumer_id, { state: 'suspended' })
    return found
  })
  expect(seen?.consumer_id).toBe(fresh.consumer_id)
  expect(storage.find('consumers', fresh.consumer_id)?.state).toBe('suspended')
})

test('a write undone while a change was being decided refuses that change (its mark is checked again at commit)', async () => {
  const { storage, store } = await openStorage()
  await storage.transaction(async (tx) => void (await tx.insert('consumers', consumer())))
  // The next fsync is held, then failed: fdatasync reporting EIO cannot be caused on demand.
  const file = (store as unknown as { writer: { file: FileHandle } }).writer.file
  const datasync = file.datasync.bind(file)
  const held = Promise.withResolvers<(error: Error) => void>()
  file.datasync = () =>
    new Promise<void>((_, reject) => {
      file.datasync = datasync
      held.resolve(reject)
    })
  const since = storage.mark()
  const undone = storage.transaction(async (tx) => void (await tx.insert('consumers', consumer())))
  const deciding = Promise.withResolvers<void>()
  const gate = Promise.withResolvers<void>()
  const change = storage.transaction(async (tx) => {
    deciding.resolve()
    await gate.promise
    await tx.insert('consumers', consumer())
  }, since)
  const fail = await held.promise
  await deciding.promise
  fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }))
  await expect(undone).rejects.toBeInstanceOf(StorageUnavailableError)
  gate.resolve()
  await expect(change).rejects.toBeInstanceOf(StorageUnavailableError)
})

test("a read waits for the writes its customer may see, not for another customer's (docs/storage.md, \"What each implementation promises\"); the vendor's waits for every write", async () => {
  const { storage, store } = await openStorage()
  const [a, b] = [crypto.randomUUID(), crypto.randomUUID()]
  // The moment customer A's change is applied and not yet durable, as a read arriving then sees it.
  const seen: Record<string, boolean> = {}
  const commit = store.commit.bind(store)
  store.commit = ((body, readers) => {
    const durable = commit(body, readers)
    seen.customerB = storage.settle('answer', undefined, b) instanceof Promise
    seen.customerA = storage.settle('answer', undefined, a) instanceof Promise
    seen.vendor = storage.settle('answer', undefined, null) instanceof Promise
    return durable
  }) as Store['commit']
  await storage.transaction(async (tx) => (await tx.insert('consumers', { ...consumer(), organization_id: a }), tx.appendEvent(freshEvent({ customer_id: a }), await tx.time())))
  expect(seen).toEqual({ customerB: false, customerA: true, vendor: true })
  // A change of the vendor's own records (its events name no customer) is waited for by the vendor alone.
  await storage.transaction(async (tx) => tx.appendEvent(freshEvent({ customer_id: null }), await tx.time()))
  expect(seen).toEqual({ customerB: false, customerA: false, vendor: true })
  // A change without events (retention's drop) is waited for by every read.
  await storage.transaction(async (tx) => void (await tx.insert('consumers', consumer())))
  expect(seen).toEqual({ customerB: true, customerA: true, vendor: true })
  // Durable: nothing to wait for.
  expect([b, a, null].map((reader) => storage.settle('answer', undefined, reader))).toEqual(['answer', 'answer', 'answer'])
})
