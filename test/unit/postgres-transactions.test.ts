/**
 * The PostgreSQL storage's transactions (docs/storage.md, "PostgreSQL"): commits, rollbacks, retries,
 * deadlocks and row locks.
 * Skipped where no database server answers (README, "Database mode"); the set-up is test/support/postgres-storage.ts `createTestStorage`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { PostgresStorage } from '../../src/storage/postgres'
import { DatabaseUnavailableError } from '../../src/storage/postgres/errors'
import type { Tx } from '../../src/storage/storage'
import { databaseTestsCanRun, createTestDatabase } from '../support/database'
import { asTenant, createTestStorage, freshConsumer } from '../support/postgres-storage'

const reachable = await databaseTestsCanRun()

describe.skipIf(!reachable)('PostgreSQL storage', () => {
  let storage: PostgresStorage
  let admin: SQL
  let close = async () => {}
  beforeAll(async () => ({ storage, admin, close } = await createTestStorage()))
  afterAll(() => close())

  describe('transactions', () => {
    test('a deadlock runs the losing body again, and both changes commit', async () => {
      const [a, b] = await storage.transaction(async (tx) => [await tx.insert('consumers', freshConsumer()), await tx.insert('consumers', freshConsumer())])
      let runs = 0
      // Each holds one row and then asks for the other's, once both hold theirs: a certain deadlock.
      let holding = 0
      let bothHold!: () => void
      const bothHolding = new Promise<void>((resolve) => (bothHold = resolve))
      const crossing = (first: string, second: string, state: 'suspended' | 'active') =>
        storage.transaction(async (tx) => {
          runs++
          await tx.find('consumers', first, 'update')
          if (++holding === 2) bothHold()
          await bothHolding
          await tx.find('consumers', second, 'update')
          return tx.update('consumers', first, { state })
        })
      const results = await Promise.all([crossing(a!.consumer_id, b!.consumer_id, 'suspended'), crossing(b!.consumer_id, a!.consumer_id, 'suspended')])
      expect(results.map((r) => r.state)).toEqual(['suspended', 'suspended'])
      // The victim ran again (more than once if its new try took the row before the winner woke).
      expect(runs).toBeGreaterThanOrEqual(3)
    })

    test('a serialization failure runs the body again, a bounded number of times', async () => {
      const serializationFailure = () => Object.assign(new Error('could not serialize access'), { errno: '40001' })
      let runs = 0
      const id = crypto.randomUUID()
      const record = await storage.transaction(async (tx) => {
        const inserted = await tx.insert('consumers', freshConsumer(id))
        if (++runs < 3) throw serializationFailure() // rolled back each time: the key is free again
        return inserted
      })
      expect({ runs, id: record.consumer_id }).toEqual({ runs: 3, id })

      // Still failing after the last run: the database cannot serve it now (a 503), not an unexpected error.
      let hopeless = 0
      const outcome = await storage.transaction(async () => {
        hopeless++
        throw serializationFailure()
      }).catch((error) => error)
      expect(outcome).toBeInstanceOf(DatabaseUnavailableError)
      expect(outcome.cause.errno).toBe('40001')
      expect(hopeless).toBe(5)
    })

    test("a database whose default isolation is SERIALIZABLE: keyward's connections run at READ COMMITTED, and concurrent changes of one row all commit", async () => {
      const strict = await createTestDatabase()
      const setup = new SQL({ url: strict.url, max: 1 })
      await setup.unsafe(`ALTER DATABASE ${new URL(strict.url).pathname.slice(1)} SET default_transaction_isolation = 'serializable'`)
      await setup.close()
      const strictStorage = PostgresStorage.connect(strict.url)
      try {
        await strictStorage.underMigrationLock(async () => {})
        const pools = strictStorage as unknown as { sql: SQL; listSql: SQL }
        for (const pool of [pools.sql, pools.listSql]) expect((await pool`SHOW transaction_isolation`)[0].transaction_isolation).toBe('read committed')
        // As a request changes a record: the row read with a lock, then written. At SERIALIZABLE,
        // most of these failed past their retries.
        const record = await strictStorage.transaction((tx) => tx.insert('consumers', freshConsumer()))
        const changes = Array.from({ length: 20 }, (_, i) =>
          strictStorage.transaction(async (tx) => {
            const current = await tx.find('consumers', record.consumer_id, 'update')
            return tx.update('consumers', current!.consumer_id, { state: i % 2 === 0 ? 'suspended' : 'active' })
          }),
        )
        const outcomes = await Promise.allSettled(changes)
        expect(outcomes.filter((outcome) => outcome.status === 'rejected')).toEqual([])
      } finally {
        await strictStorage.close()
        await strict.drop()
      }
    })

    /**
     * A transaction that reads consumer `id` with `lock`, then waits until `release` is called,
     * holding whatever that read took, and then runs `after`. Resolves once the read is done.
     */
    async function pausedAfterFind(id: string, lock: 'update' | 'none', after: (tx: Tx) => Promise<unknown> = async () => {}) {
      let found!: () => void
      const hasFound = new Promise<void>((resolve) => (found = resolve))
      let release!: () => void
      const released = new Promise<void>((resolve) => (release = resolve))
      const done = storage.transaction(async (tx) => {
        await tx.find('consumers', id, lock)
        found()
        await released
        return after(tx)
      })
      await hasFound
      return { release, done }
    }
    const suspend = (id: string) => (tx: Tx) => tx.update('consumers', id, { state: 'suspended' })

    test("a statement the database gives up on (its lock_timeout, statement_timeout, a cancel) is 'unavailable' (503), not an unexpected error", async () => {
      // A database of its own, whose sessions wait 50 ms at most for a lock (as managed services often set).
      const strict = await createTestDatabase()
      const strictStorage = PostgresStorage.connect(strict.url)
      const holder = new SQL({ url: strict.url, max: 1 })
      try {
        await holder.unsafe(`ALTER DATABASE ${new URL(strict.url).pathname.slice(1)} SET lock_timeout = '50ms'`)
        await strictStorage.underMigrationLock(async () => {})
        const record = await strictStorage.transaction((tx) => tx.insert('consumers', freshConsumer()))
        const outcome = await holder.begin(async (locked) => {
          await locked`SELECT 1 FROM consumers WHERE consumer_id = ${record.consumer_id} FOR UPDATE`
          return strictStorage.transaction(suspend(record.consumer_id)).catch((error) => error)
        })
        expect(outcome).toBeInstanceOf(DatabaseUnavailableError)
        expect(outcome.cause.errno).toBe('55P03') // lock_not_available
        expect((await strictStorage.find('consumers', record.consumer_id))?.state).toBe('active')
      } finally {
        await strictStorage.close()
        await holder.close()
        await strict.drop()
      }
    })

    test('a find inside a transaction waits for a concurrent change of that row and sees it', async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
      const suspending = await pausedAfterFind(record.consumer_id, 'update', suspend(record.consumer_id))
      const reading = storage.transaction(async (tx) => tx.find('consumers', record.consumer_id))
      // Released only once the reader is waiting for the row lock, so it must see the change.
      for (let waiting = 0; waiting === 0; ) {
        ;[{ waiting }] = await admin`SELECT count(*)::int AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
      }
      suspending.release()
      await suspending.done
      expect((await reading)!.state).toBe('suspended')
    })

    test("a find with lock 'none' neither waits for a row another transaction holds nor locks it", async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
      const suspending = await pausedAfterFind(record.consumer_id, 'update', suspend(record.consumer_id))
      // Answered while the row is held (the committed state), where a locking find would wait.
      const read = await storage.transaction(async (tx) => tx.find('consumers', record.consumer_id, 'none'))
      expect(read!.state).toBe('active')
      suspending.release()
      await suspending.done
      // And it took no lock: while a transaction that read it so is open, no row-share lock is held on the table.
      const holder = await pausedAfterFind(record.consumer_id, 'none')
      const [{ locks }] = await admin`SELECT count(*)::int AS locks FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND c.relname = 'consumers' AND l.mode = 'RowShareLock'`
      holder.release()
      await holder.done
      expect(locks).toBe(0)
    })

    test("a tenant's transactions hold all connections but one: another tenant's change runs at once, however many the first has waiting (docs/storage.md, \"Turns at the connections\")", async () => {
      // The pool of reads and changes: 12 of the default 16 connections (the other 4 are the lists').
      const connections = 12
      let release!: () => void
      const held = new Promise<void>((resolve) => (release = resolve))
      let started = 0
      const busy = Array.from({ length: connections + 4 }, () =>
        asTenant(storage, 'busy tenant', () =>
          storage.transaction(async (tx) => {
            await tx.insert('consumers', freshConsumer())
            started++
            await held
          }),
        ),
      )
      // Served first come, first served, the other tenant's change waited for the busy one's to end (503 at its timeout).
      const other = await asTenant(storage, 'other tenant', () => storage.transaction((tx) => tx.insert('consumers', freshConsumer())))
      expect(other.consumer_id).toBeString()
      expect(started).toBeLessThan(connections)
      release()
      await Promise.all(busy)
      expect(started).toBe(connections + 4)
    })
  })

})
