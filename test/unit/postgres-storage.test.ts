/**
 * The PostgreSQL storage on its own (docs/storage.md, "PostgreSQL"): migrations under the lock,
 * timestamps, uniqueness under concurrency, list conditions, paging and order, transaction
 * retries, lost connections; tokens and audit events, and retention's delete. Skipped where no database server answers (README, "Database mode").
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { SQL } from 'bun'
import { PostgresStorage } from '../../src/storage/postgres'
import { DatabaseUnavailableError } from '../../src/storage/postgres/errors'
import { MIGRATIONS, SCHEMA_VERSION, SchemaTooNewError } from '../../src/storage/postgres/schema'
import * as statements from '../../src/storage/postgres/statements'
import { EVENTS_PER_STATEMENT, listStatement } from '../../src/storage/postgres/statements'
import type { AuditEvent, TableName } from '../../src/storage/records'
import { UniqueViolation, type Condition, type Fresh, type ListQuery, type Page, type Tx } from '../../src/storage/storage'
import { newSlice } from '../../src/ops/turns'
import { recordEvent } from '../../src/modules/shared/audit'
import { createTestDatabase, databaseTestsCanRun, pausableRelay, type TestDatabase } from '../support/database'
import { turnsDuring } from '../support/event-loop'
import { waitFor } from '../support/server-process'

const reachable = await databaseTestsCanRun()

describe.skipIf(!reachable)('PostgreSQL storage', () => {
  let db: TestDatabase
  let storage: PostgresStorage
  let admin: SQL
  const customer = crypto.randomUUID()

  beforeAll(async () => {
    db = await createTestDatabase()
    // Deadlocks are found after deadlock_timeout (1 s by default): sooner here, for the deadlock test.
    const setup = new SQL({ url: db.url, max: 1 })
    await setup.unsafe(`ALTER DATABASE ${new URL(db.url).pathname.slice(1)} SET deadlock_timeout = '100ms'`)
    await setup.close()
    storage = PostgresStorage.connect(db.url)
    await storage.underMigrationLock(async () => {})
    admin = new SQL({ url: db.url, max: 2 })
  })
  afterAll(async () => {
    await storage?.close()
    await admin?.close()
    await db?.drop()
  })

  const consumer = (id = crypto.randomUUID(), organization_id = customer): Fresh<'consumers'> => ({ consumer_id: id, organization_id, state: 'active' })
  const enrollment = (fields: Partial<Fresh<'enrollments'>> = {}): Fresh<'enrollments'> => ({
    enrollment_id: crypto.randomUUID(),
    organization_id: customer,
    consumer_id: crypto.randomUUID(),
    installation_id: crypto.randomUUID(),
    application_id: crypto.randomUUID(),
    environment: 'PRODUCTION',
    active_keyset_id: null,
    client_enclave_key: null,
    state: 'active',
    ...fields,
  })

  const event = (fields: Partial<Fresh<'audit_events'>> = {}): Fresh<'audit_events'> => ({
    event_id: Bun.randomUUIDv7(),
    action: 'consumer.create',
    target_type: 'consumer',
    target_id: crypto.randomUUID(),
    actor_organization_id: customer,
    actor_token_id: crypto.randomUUID(),
    actor_role: 'admin',
    actor_cli: null,
    customer_id: customer,
    changes: { state: [null, 'active'] },
    trace_id: crypto.randomUUID(),
    ...fields,
  })

  describe('migrations', () => {
    test('instances starting together apply each migration once', async () => {
      const other = await createTestDatabase()
      const instances = [1, 2, 3].map(() => PostgresStorage.connect(other.url))
      try {
        const order: number[] = []
        await Promise.all(instances.map((instance, i) => instance.underMigrationLock(async () => void order.push(i))))
        expect(order.sort()).toEqual([0, 1, 2])
        const sql = new SQL({ url: other.url, max: 1 })
        const rows = await sql`SELECT version FROM schema_migrations ORDER BY version`
        await sql.close()
        expect(rows.map((row: { version: number }) => row.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1))
      } finally {
        await Promise.all(instances.map((instance) => instance.close()))
        await other.drop()
      }
    })

    test('a schema newer than this program is refused, naming both versions', async () => {
      const other = await createTestDatabase()
      const instance = PostgresStorage.connect(other.url)
      try {
        await instance.underMigrationLock(async () => {})
        const sql = new SQL({ url: other.url, max: 1 })
        await sql`INSERT INTO schema_migrations (version, name) VALUES (${SCHEMA_VERSION + 1}, 'from the future')`
        await sql.close()
        const refused = await instance.underMigrationLock(async () => 'ran').catch((error) => error)
        expect(refused).toBeInstanceOf(SchemaTooNewError)
        expect(refused.message).toContain(`version ${SCHEMA_VERSION + 1}`)
        expect(refused.message).toContain(`version ${SCHEMA_VERSION})`)
        expect(await instance.requireCurrentSchema().catch((error) => error)).toBeInstanceOf(SchemaTooNewError)
      } finally {
        await instance.close()
        await other.drop()
      }
    })
  })

  test('a database of schema version 4 is migrated: the enrollment counters start from the enrollments there', async () => {
    const other = await createTestDatabase()
    const sql = new SQL({ url: other.url, max: 1 })
    const instance = PostgresStorage.connect(other.url)
    try {
      for (const migration of MIGRATIONS.slice(0, 4)) await sql.unsafe(migration.sql)
      await sql`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`
      for (let version = 1; version <= 4; version++) await sql`INSERT INTO schema_migrations (version, name) VALUES (${version}, ${MIGRATIONS[version - 1]!.name})`
      const [application, owner] = [crypto.randomUUID(), crypto.randomUUID()]
      await sql`INSERT INTO enrollments (enrollment_id, organization_id, consumer_id, installation_id, application_id, environment, state, created, modified)
        SELECT gen_random_uuid(), ${owner}, gen_random_uuid(), gen_random_uuid(), ${application}, 'PRODUCTION', 'active', i, i FROM generate_series(1, 12) i`
      await instance.underMigrationLock(async () => {})
      expect(await instance.schemaVersion()).toBe(SCHEMA_VERSION)
      const page = await instance.list({ table: 'enrollments', scope: owner, where: [{ field: 'application_id', in: [application] }], page: { number: 2, size: 5 }, order: 'asc' })
      expect({ total: page.total, items: page.items.length }).toEqual({ total: 12, items: 5 })
    } finally {
      await instance.close()
      await sql.close()
      await other.drop()
    }
  })

  test('a database of schema version 1 (signed tokens) is migrated: signing_secret dropped, tokens and audit_events there', async () => {
    const other = await createTestDatabase()
    const sql = new SQL({ url: other.url, max: 1 })
    const instance = PostgresStorage.connect(other.url)
    try {
      // As version 1 left it: its schema, its row, and a signing secret.
      await sql.unsafe(MIGRATIONS[0]!.sql)
      await sql`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`
      await sql`INSERT INTO schema_migrations (version, name) VALUES (1, ${MIGRATIONS[0]!.name})`
      await sql`INSERT INTO signing_secret (secret) VALUES (${new Uint8Array(32)})`
      expect(await instance.schemaVersion()).toBe(1)
      await instance.underMigrationLock(async () => {})
      expect(await instance.schemaVersion()).toBe(SCHEMA_VERSION)
      const [tables] = await sql`SELECT to_regclass('signing_secret') AS secret, to_regclass('tokens') AS tokens, to_regclass('audit_events') AS events`
      expect(tables).toEqual({ secret: null, tokens: 'tokens', events: 'audit_events' })
    } finally {
      await instance.close()
      await sql.close()
      await other.drop()
    }
  })

  describe('records and timestamps', () => {
    test('insert sets created = modified from the database clock; find and findMany read it back', async () => {
      const before = Date.now() * 1000
      const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
      expect(record.created).toBe(record.modified)
      expect(record.created).toBeGreaterThanOrEqual(before - 5_000_000) // the database's clock, not ours: loosely
      expect(await storage.find('consumers', record.consumer_id)).toEqual(record)
      const missing = crypto.randomUUID()
      expect(await storage.findMany('consumers', [missing, record.consumer_id])).toEqual([undefined, record])
    })

    test('findWithParent: a record with the record its field names, in one read', async () => {
      const organization = crypto.randomUUID()
      const application = await storage.transaction((tx) =>
        tx.insert('applications', { application_id: crypto.randomUUID(), organization_id: organization, description: 'app', environments: ['PRODUCTION'], state: 'active', api_key_hash: 'a-hash' }),
      )
      const enrolled = await storage.transaction((tx) => tx.insert('enrollments', enrollment({ application_id: application.application_id })))
      const link = { field: 'application_id', table: 'applications' } as const
      // The same records as `find` reads, each with its own field types (text[], bigint).
      expect(await storage.findWithParent('enrollments', enrolled.enrollment_id, link)).toEqual({ record: enrolled, parent: application })
      const orphan = await storage.transaction((tx) => tx.insert('enrollments', enrollment()))
      expect(await storage.findWithParent('enrollments', orphan.enrollment_id, link)).toEqual({ record: orphan, parent: undefined })
      expect(await storage.findWithParent('enrollments', crypto.randomUUID(), link)).toBeUndefined()
      expect(await storage.findWithParent('enrollments', enrolled.enrollment_id.toUpperCase(), link)).toBeUndefined()
    })

    test('`within`: a record that does not meet it is answered like a missing one, by the statement itself', async () => {
      const owner = crypto.randomUUID()
      const record = await storage.transaction((tx) => tx.insert('consumers', { ...consumer(), organization_id: owner }))
      const own = [{ field: 'organization_id', in: [owner] }] as const
      const other = [{ field: 'organization_id', in: [crypto.randomUUID()] }] as const
      expect(await storage.find('consumers', record.consumer_id, own)).toEqual(record)
      expect(await storage.find('consumers', record.consumer_id, other)).toBeUndefined()
      expect(await storage.find('consumers', record.consumer_id, [{ field: 'organization_id', in: [] }])).toBeUndefined()
      const link = { field: 'organization_id', table: 'organizations' } as const
      expect((await storage.findWithParent('consumers', record.consumer_id, link, own))?.record).toEqual(record)
      expect(await storage.findWithParent('consumers', record.consumer_id, link, other)).toBeUndefined()
    })

    test('text that is not a lowercase UUID names nothing (as in the embedded store), never an error', async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
      for (const id of ['constructor', '', record.consumer_id.toUpperCase()]) {
        expect(await storage.find('consumers', id)).toBeUndefined()
        expect(await storage.transaction(async (tx) => tx.find('consumers', id, 'update'))).toBeUndefined()
        expect(await storage.list({ table: 'consumers', where: [{ field: 'consumer_id', in: [id] }], order: 'asc' })).toEqual({ items: [], total: 0 })
      }
      expect(await storage.findMany('consumers', ['constructor', record.consumer_id])).toEqual([undefined, record])
    })

    test('modified strictly increases, even past a clock that is behind it', async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
      const future = record.modified + 3_600_000_000 // as if another instance's change was an hour ahead
      await admin`UPDATE consumers SET modified = ${future} WHERE consumer_id = ${record.consumer_id}`
      const changed = await storage.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' }))
      expect(changed.modified).toBe(future + 1)
      expect(changed.created).toBe(record.created)
      const again = await storage.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'active' }))
      expect(again.modified).toBe(future + 2)
    })

    test("a change's audit event takes the record's time, even when its modified is past the transaction's start", async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
      const future = record.modified + 3_600_000_000 // another instance's change an hour ahead
      await admin`UPDATE consumers SET modified = ${future} WHERE consumer_id = ${record.consumer_id}`
      const before = { ...record, modified: future }
      let eventId = ''
      const changed = await storage.transaction(async (tx) => {
        const after = await tx.update('consumers', record.consumer_id, { state: 'suspended' })
        recordEvent({ appendEvent: (event, time) => ((eventId = event.event_id), tx.appendEvent(event, time)) }, { cli: 'test' }, 'consumer.suspend', {
          target: record.consumer_id,
          customerId: customer,
          before,
          after,
        })
        return after
      })
      const [stored] = await admin.unsafe('SELECT created, modified FROM audit_events WHERE event_id = $1::uuid', [eventId])
      expect([Number(stored.created), Number(stored.modified)]).toEqual([changed.modified, changed.modified])
      expect(changed.modified).toBe(future + 1)
    })

    test('organizations keep their environments (jsonb) and applications theirs (text[])', async () => {
      const org = await storage.transaction((tx) =>
        tx.insert('organizations', {
          organization_id: crypto.randomUUID(),
          parent_id: crypto.randomUUID(),
          organization_type: 'customer',
          description: 'Env "quoted" 100%',
          state: 'active',
          environments: { default: 'PROD', supported: ['DEV', 'PROD'] },
        }),
      )
      expect(await storage.find('organizations', org.organization_id)).toMatchObject({ environments: { default: 'PROD', supported: ['DEV', 'PROD'] } })
      const app = await storage.transaction((tx) =>
        tx.insert('applications', {
          application_id: crypto.randomUUID(),
          organization_id: org.organization_id,
          description: 'App',
          environments: ['DEV', 'PROD'],
          state: 'active',
          api_key_hash: 'ab'.repeat(32),
        }),
      )
      expect((await storage.find('applications', app.application_id))!.environments).toEqual(['DEV', 'PROD'])
      expect(await storage.exists('applications', [{ field: 'environments', has: 'DEV' }, { field: 'organization_id', in: [org.organization_id] }])).toBe(true)
      expect(await storage.exists('applications', [{ field: 'environments', has: 'TEST' }, { field: 'organization_id', in: [org.organization_id] }])).toBe(false)
    })

    test('a body that throws leaves nothing behind', async () => {
      const id = crypto.randomUUID()
      const failure = new Error('rule broken')
      await expect(
        storage.transaction(async (tx) => {
          await tx.insert('consumers', consumer(id))
          throw failure
        }),
      ).rejects.toBe(failure)
      expect(await storage.find('consumers', id)).toBeUndefined()
    })

    test('an appended event commits with its change; one that fails fails the change, and nothing is committed', async () => {
      const kept = event()
      const record = await storage.transaction(async (tx) => {
        const inserted = await tx.insert('consumers', consumer())
        tx.appendEvent(kept, inserted.modified)
        return inserted
      })
      const [stored] = await admin.unsafe('SELECT target_id, created FROM audit_events WHERE event_id = $1::uuid', [kept.event_id])
      expect(stored.target_id).toBe(kept.target_id)
      expect(Number(stored.created)).toBe(record.created) // one change, one time
      // The same event id again: the insert fails after the body has returned, with the COMMIT.
      const id = crypto.randomUUID()
      const failed = await storage
        .transaction(async (tx) => {
          const inserted = await tx.insert('consumers', consumer(id))
          tx.appendEvent({ ...event(), event_id: kept.event_id }, inserted.modified)
          return 'returned'
        })
        .catch((error) => error)
      expect(failed).toBeInstanceOf(Error)
      expect(failed.errno).toBe('23505')
      expect(await storage.find('consumers', id)).toBeUndefined()
    })

    test('the events of one change go in as few statements as EVENTS_PER_STATEMENT allows, every one of them kept', async () => {
      const events = Array.from({ length: EVENTS_PER_STATEMENT * 2 + 1 }, () => event())
      const sent: string[] = []
      const sql = (storage as unknown as { sql: { reserve(): Promise<{ unsafe(text: string, params?: unknown[]): Promise<unknown> }> } }).sql
      const reserve = sql.reserve.bind(sql)
      const spy = spyOn(sql, 'reserve').mockImplementation(async () => {
        const connection = await reserve()
        const unsafe = connection.unsafe.bind(connection)
        connection.unsafe = (text: string, params?: unknown[]) => (sent.push(text), unsafe(text, params))
        return connection
      })
      try {
        await storage.transaction(async (tx) => {
          const inserted = await tx.insert('consumers', consumer())
          for (const e of events) tx.appendEvent(e, inserted.modified)
        })
      } finally {
        spy.mockRestore()
      }
      expect(sent.filter((text) => text.startsWith('INSERT INTO audit_events')).length).toBe(3)
      const [{ n }] = await admin.unsafe('SELECT count(*)::int AS n FROM audit_events WHERE event_id = ANY($1::uuid[])', [events.map((e) => e.event_id)])
      expect(n).toBe(events.length)
    })

    test('a statement that failed, even one whose error the body caught, means the change is refused and nothing committed', async () => {
      const taken = await storage.transaction((tx) => tx.insert('consumers', consumer()))
      const id = crypto.randomUUID()
      const failed = await storage
        .transaction(async (tx) => {
          await tx.insert('consumers', consumer(id))
          await tx.insert('consumers', { ...consumer(), consumer_id: taken.consumer_id }).catch(() => undefined)
          return 'returned'
        })
        .catch((error) => error)
      expect(failed).toBeInstanceOf(Error)
      expect(failed.errno).toBe('23505')
      expect(await storage.find('consumers', id)).toBeUndefined()
    })
  })

  describe('uniqueness', () => {
    test('insert: a taken key or enrollment tuple is a UniqueViolation naming the rule', async () => {
      const first = await storage.transaction((tx) => tx.insert('enrollments', enrollment()))
      const sameKey = await storage.transaction((tx) => tx.insert('enrollments', enrollment({ enrollment_id: first.enrollment_id }))).catch((e) => e)
      expect(sameKey).toBeInstanceOf(UniqueViolation)
      expect(sameKey.rule).toBe('primary_key')
      const { enrollment_id: _, ...tuple } = first
      const sameTuple = await storage.transaction((tx) => tx.insert('enrollments', enrollment({ ...tuple, enrollment_id: crypto.randomUUID() }))).catch((e) => e)
      expect(sameTuple).toBeInstanceOf(UniqueViolation)
      expect(sameTuple.rule).toBe('enrollment_tuple')
    })

    test('insertIfAbsent at once from many connections: one inserts, the others get that record', async () => {
      const id = crypto.randomUUID()
      const results = await Promise.all(Array.from({ length: 8 }, () => storage.transaction((tx) => tx.insertIfAbsent('consumers', consumer(id)))))
      expect(results.filter((r) => r.inserted)).toHaveLength(1)
      const created = results.find((r) => r.inserted)!.record
      for (const r of results) expect(r.record).toEqual(created)
    })

    test('concurrent enrollments of one tuple: one inserted; the same id is returned, another id is the tuple rule', async () => {
      const tuple = enrollment()
      const sameId = await Promise.all(Array.from({ length: 6 }, () => storage.transaction((tx) => tx.insertIfAbsent('enrollments', tuple))))
      expect(sameId.filter((r) => r.inserted)).toHaveLength(1)
      expect(new Set(sameId.map((r) => r.record.enrollment_id))).toEqual(new Set([tuple.enrollment_id]))

      const fresh = enrollment()
      const outcomes = await Promise.allSettled(
        Array.from({ length: 6 }, () => storage.transaction((tx) => tx.insertIfAbsent('enrollments', { ...fresh, enrollment_id: crypto.randomUUID() }))),
      )
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1)
      for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ name: 'UniqueViolation', rule: 'enrollment_tuple' })
    })
  })

  describe('transactions', () => {
    test('a deadlock runs the losing body again, and both changes commit', async () => {
      const [a, b] = await storage.transaction(async (tx) => [await tx.insert('consumers', consumer()), await tx.insert('consumers', consumer())])
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
        const inserted = await tx.insert('consumers', consumer(id))
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
        const record = await strictStorage.transaction((tx) => tx.insert('consumers', consumer()))
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
        const record = await strictStorage.transaction((tx) => tx.insert('consumers', consumer()))
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
      const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
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
      const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
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
  })

  describe('lists', () => {
    const owner = crypto.randomUUID()
    const other = crypto.randomUUID()
    const ids: string[] = []
    const descriptions = ['Pixel 8', 'pixel 7a', '100% Pixel_8', 'iPhone', 'Pixel 8']
    let sameTime: string[] = []

    beforeAll(async () => {
      for (const description of descriptions) {
        const record = await storage.transaction((tx) =>
          tx.insert('installations', { installation_id: crypto.randomUUID(), organization_id: owner, description, state: 'unregistered' }),
        )
        ids.push(record.installation_id)
      }
      await storage.transaction((tx) => tx.insert('installations', { installation_id: crypto.randomUUID(), organization_id: other, description: 'Pixel 8', state: 'verified' }))
      // One transaction: one `created` for all three, so the key orders them.
      const three = await storage.transaction(async (tx) => {
        const made = []
        for (let i = 0; i < 3; i++) made.push(await tx.insert('consumers', consumer(crypto.randomUUID(), owner)))
        return made
      })
      sameTime = three.map((c) => c.consumer_id).sort()
    })

    const installations = (where: ListQuery<'installations'>['where'], extra: Partial<ListQuery<'installations'>> = {}) =>
      storage.list({ table: 'installations', scope: owner, where, order: 'asc', ...extra })

    test('in creation order, desc reversed, scoped to the owner', async () => {
      expect((await installations([])).items.map((r) => r.installation_id)).toEqual(ids)
      expect((await installations([], { order: 'desc' })).items.map((r) => r.installation_id)).toEqual([...ids].reverse())
      const consumers = await storage.list({ table: 'consumers', scope: owner, where: [], order: 'asc' })
      expect(consumers.items.map((c) => c.consumer_id)).toEqual(sameTime)
    })

    test('text matches are case-sensitive, with % and _ taken literally', async () => {
      const descriptionsOf = async (match: 'exact' | 'contains' | 'startswith', text: string) =>
        (await installations([{ field: 'description', match, text }])).items.map((r) => r.description)
      expect(await descriptionsOf('exact', 'Pixel 8')).toEqual(['Pixel 8', 'Pixel 8'])
      expect(await descriptionsOf('contains', 'ixel')).toEqual(['Pixel 8', 'pixel 7a', '100% Pixel_8', 'Pixel 8'])
      expect(await descriptionsOf('startswith', 'pixel')).toEqual(['pixel 7a'])
      expect(await descriptionsOf('contains', '% P')).toEqual(['100% Pixel_8'])
      expect(await descriptionsOf('contains', '_')).toEqual(['100% Pixel_8'])
      expect(await descriptionsOf('startswith', '1_0')).toEqual([])
    })

    test('paging: total before paging, a page past the end is empty with the total', async () => {
      const page2 = await installations([], { page: { number: 2, size: 2 } })
      expect(page2).toEqual({ items: (await installations([])).items.slice(2, 4), total: 5 })
      const last = await installations([], { page: { number: 2, size: 2 }, order: 'desc' })
      expect(last.items.map((r) => r.installation_id)).toEqual([ids[2]!, ids[1]!])
      expect(await installations([], { page: { number: 4, size: 2 } })).toEqual({ items: [], total: 5 })
      expect(await installations([{ field: 'state', in: ['verified'] }], { page: { number: 1, size: 2 } })).toEqual({ items: [], total: 0 })
    })

    test('in: alternatives; an empty list matches nothing; from/until bound a timestamp', async () => {
      const all = (await installations([])).items
      const picked = await installations([{ field: 'installation_id', in: [ids[3]!, ids[1]!, crypto.randomUUID()] }])
      expect(picked.items.map((r) => r.installation_id)).toEqual([ids[1]!, ids[3]!])
      expect((await installations([{ field: 'installation_id', in: [] }])).total).toBe(0)
      const window = await installations([{ field: 'created', from: all[1]!.created, until: all[3]!.created }])
      expect(window.items.map((r) => r.installation_id)).toEqual(ids.slice(1, 4))
    })

    test('enrolled: consumers and installations with an enrollment of the given application', async () => {
      const application = crypto.randomUUID()
      const [c1, c2] = [crypto.randomUUID(), crypto.randomUUID()]
      await storage.transaction(async (tx) => {
        await tx.insert('consumers', consumer(c1, owner))
        await tx.insert('consumers', consumer(c2, owner))
        await tx.insert('enrollments', enrollment({ organization_id: owner, consumer_id: c1, installation_id: ids[0]!, application_id: application }))
        await tx.insert('enrollments', enrollment({ organization_id: owner, consumer_id: c1, installation_id: ids[2]!, application_id: application }))
      })
      const enrolled = await storage.list({ table: 'consumers', scope: owner, where: [{ enrolled: 'application_id', in: [application] }], order: 'asc' })
      expect(enrolled).toEqual({ items: [(await storage.find('consumers', c1))!], total: 1 })
      const devices = await installations([{ enrolled: 'consumer_id', in: [c1] }])
      expect(devices.items.map((r) => r.installation_id)).toEqual([ids[0]!, ids[2]!])
      expect((await installations([{ enrolled: 'consumer_id', in: [] }])).total).toBe(0)
    })

    test('the total of a page filtered by application alone is read from the enrollment counters, which follow every change (schema 5; docs/storage.md, "Lists")', async () => {
      const [application, other] = [crypto.randomUUID(), crypto.randomUUID()]
      const page = (where: Condition<'enrollments'>[]) => storage.list({ table: 'enrollments', scope: owner, where, page: { number: 1, size: 5 }, order: 'asc' })
      const byApplication = (ids: string[]) => page([{ field: 'application_id', in: ids }])
      const counted = async (ids: string[]) => Number((await admin`SELECT count(*) AS n FROM enrollments WHERE application_id = ANY(${ids}::uuid[])`)[0].n)
      // Concurrent transactions, on as many connections (counter rows of their own or shared).
      await Promise.all([0, 1, 2, 3].map((k) => storage.transaction(async (tx) => {
        for (let i = 0; i < 30; i++) await tx.insert('enrollments', enrollment({ organization_id: owner, application_id: (i + k) % 3 === 0 ? other : application }))
      })))
      expect((await byApplication([application])).total).toBe(await counted([application]))
      expect((await byApplication([application, other])).total).toBe(120)
      expect((await byApplication([crypto.randomUUID()])).total).toBe(0)
      expect((await byApplication([])).total).toBe(0)
      // Not a change keyward makes, but the counters hold whatever changes the rows.
      await admin`UPDATE enrollments SET application_id = ${other} WHERE enrollment_id IN (SELECT enrollment_id FROM enrollments WHERE application_id = ${application} LIMIT 7)`
      await admin`DELETE FROM enrollments WHERE enrollment_id IN (SELECT enrollment_id FROM enrollments WHERE application_id = ${other} LIMIT 3)`
      expect([(await byApplication([application])).total, (await byApplication([other])).total]).toEqual([await counted([application]), await counted([other])])
      // With any other condition the rows are counted.
      const active = await page([{ field: 'application_id', in: [application] }, { field: 'state', in: ['active'] }])
      expect(active.total).toBe(await counted([application]))
      const plan = await planOf({ table: 'enrollments', scope: owner, where: [{ field: 'application_id', in: [application] }], page: { number: 1, size: 25 }, order: 'asc' })
      expect(plan).toContain('"Relation Name":"enrollment_counts"')
      expect(plan.match(/"Relation Name":"enrollments"/g)).toHaveLength(1) // the page's rows only
    })
  })

  /** The plan of a list's statement (JSON text), the planner kept off whole-table reads: the test's tables are small. */
  async function planOf<N extends TableName>(query: ListQuery<N>): Promise<string> {
    const { text, params } = listStatement(query)
    return admin.begin(async (tx) => {
      await tx`SET LOCAL enable_seqscan = off`
      await tx`SET LOCAL enable_bitmapscan = off`
      return JSON.stringify((await tx.unsafe(`EXPLAIN (FORMAT JSON) ${text}`, params))[0]['QUERY PLAN'])
    })
  }

  describe('tokens and audit events', () => {
    const token = (fields: Partial<Fresh<'tokens'>> = {}): Fresh<'tokens'> => ({
      token_id: crypto.randomUUID(),
      organization_id: customer,
      role: 'viewer',
      description: null,
      state: 'active',
      expires: Date.now() * 1000 + 3_600_000_000,
      token_hash: 'cd'.repeat(32),
      ...fields,
    })

    test('a token keeps `expires` as a number; lists by organization, state and expiry', async () => {
      const organization = crypto.randomUUID()
      const now = Date.now() * 1000
      const live = await storage.transaction((tx) => tx.insert('tokens', token({ organization_id: organization, description: 'CI' })))
      const expired = await storage.transaction((tx) => tx.insert('tokens', token({ organization_id: organization, expires: now - 1 })))
      const revoked = await storage.transaction(async (tx) => {
        const inserted = await tx.insert('tokens', token({ organization_id: organization }))
        return tx.update('tokens', inserted.token_id, { state: 'revoked' })
      })
      expect(await storage.find('tokens', live.token_id)).toEqual(live)
      expect(typeof live.expires).toBe('number')
      const ids = async (where: ListQuery<'tokens'>['where']) =>
        (await storage.list({ table: 'tokens', where: [{ field: 'organization_id', in: [organization] }, ...where], order: 'asc' })).items.map((t) => t.token_id)
      expect(await ids([])).toEqual([live.token_id, expired.token_id, revoked.token_id])
      expect(await ids([{ field: 'state', in: ['active'] }, { field: 'expires', from: now + 1 }])).toEqual([live.token_id])
      expect(await ids([{ field: 'state', in: ['active'] }, { field: 'expires', until: now }])).toEqual([expired.token_id])
      expect(await ids([{ field: 'state', in: ['revoked'] }])).toEqual([revoked.token_id])
    })

    test('a page of big audit events is made into records in turns of the event loop, equal to what was stored (docs/security.md, "Big answers")', async () => {
      const heavy = crypto.randomUUID()
      const description = 'a' + '\u0001'.repeat(1023) // 6 KB of JSON
      const stored = Array.from({ length: 300 }, () => event({ customer_id: heavy, changes: { description: [null, description], state: [null, 'active'] } }))
      await storage.transaction(async (tx) => {
        const time = await tx.time()
        for (const e of stored) tx.appendEvent(e, time)
      })
      // Another request's work, one per turn of the loop, logged among the rows made into records.
      const listedRecord = statements.listedRecord
      let page: Page<AuditEvent> | undefined
      const order = await turnsDuring(async (log) => {
        const made = spyOn(statements, 'listedRecord').mockImplementation((table, row) => (log('row'), listedRecord(table, row)) as never)
        try {
          page = await storage.list({ table: 'audit_events', where: [{ field: 'customer_id', in: [heavy] }], page: { number: 1, size: 1000 }, order: 'asc', slice: newSlice('heavy') })
        } finally {
          made.mockRestore()
        }
      })
      if (!page) throw new Error('no page')
      expect(page.total).toBe(stored.length)
      expect(page.items.map((e) => [e.event_id, e.changes])).toEqual(stored.map((e) => [e.event_id, e.changes]))
      const rows = order.flatMap((entry, i) => (entry === 'row' ? [i] : []))
      expect(rows).toHaveLength(stored.length)
      // Turns of the loop came between the first and the last row: other requests went on meanwhile.
      expect(order.slice(rows[0], rows.at(-1)).includes('turn')).toBe(true)
    })

    test("a customer's filter on actions reads its own events of those actions alone (schema 4)", async () => {
      const busy = crypto.randomUUID()
      await storage.transaction(async (tx) => {
        const time = await tx.time()
        for (let i = 0; i < 300; i++) tx.appendEvent(event({ customer_id: busy }), time)
        for (let i = 0; i < 5; i++) tx.appendEvent(event(), time)
      })
      await admin`VACUUM ANALYZE audit_events`
      const plan = await planOf({ table: 'audit_events', where: [{ field: 'customer_id', in: [customer] }, { field: 'action', in: ['consumer.create'] }], page: { number: 1, size: 25 }, order: 'asc' })
      expect(plan).toContain('"Index Name":"audit_events_customer_action"')
      expect(plan).not.toContain('"Index Name":"audit_events_action"')
    })

    describe('credentials (docs/storage.md, "Credentials")', () => {
      const organization = (fields: Partial<Fresh<'organizations'>> = {}): Fresh<'organizations'> => ({
        organization_id: crypto.randomUUID(),
        parent_id: null,
        organization_type: 'customer',
        description: 'credential test',
        state: 'active',
        environments: null,
        ...fields,
      })
      const generation = async () => Number((await admin`SELECT generation FROM credential_generation`)[0].generation)

      test('a remembered credential is never answered after another instance changed it: revoked, suspended, its customer suspended, deleted', async () => {
        const owner = organization()
        const partner = organization({ organization_type: 'partner', parent_id: owner.organization_id })
        const issued = token({ organization_id: partner.organization_id })
        await storage.transaction(async (tx) => {
          await tx.insert('organizations', owner)
          await tx.insert('organizations', partner)
          await tx.insert('tokens', issued)
        })
        const read = () => storage.findCredential(issued.token_id)
        expect(await read()).toMatchObject({ token: { state: 'active' }, organization: { state: 'active' }, parent: { state: 'active' } })
        // `admin` is another connection: another instance, or the CLI, changing the rows.
        await admin`UPDATE organizations SET state = 'suspended' WHERE organization_id = ${owner.organization_id}`
        expect(await read()).toMatchObject({ parent: { state: 'suspended' } })
        await admin`UPDATE organizations SET state = 'suspended' WHERE organization_id = ${partner.organization_id}`
        expect(await read()).toMatchObject({ organization: { state: 'suspended' } })
        await admin`UPDATE tokens SET state = 'revoked' WHERE token_id = ${issued.token_id}`
        expect(await read()).toMatchObject({ token: { state: 'revoked' } })
        await admin`DELETE FROM tokens WHERE token_id = ${issued.token_id}`
        expect(await read()).toBeUndefined()
      })

      test("now() is the database's time as read with the credential (docs/storage.md \"Time\"): this machine's system clock plays no part", async () => {
        const issued = token()
        await storage.transaction((tx) => tx.insert('tokens', issued))
        const realDateNow = Date.now
        // This machine's system clock a day ahead (another instance's, say): expiry must not follow it.
        const systemClock = spyOn(Date, 'now').mockImplementation(() => realDateNow() + 86_400_000)
        try {
          const databaseTime = async () => Number((await admin`SELECT (extract(epoch FROM now()) * 1000000)::bigint AS now`)[0].now)
          const before = await databaseTime()
          await storage.findCredential(issued.token_id) // read: remembered from here on
          await storage.findCredential(issued.token_id) // remembered: the generation read brings the time too
          const now = storage.now()
          const after = await databaseTime()
          expect(now).toBeGreaterThanOrEqual(before)
          expect(now).toBeLessThanOrEqual(after)
        } finally {
          systemClock.mockRestore()
        }
      })

      test('without the counter (its row deleted by hand) credentials are read every time, and still seen changed', async () => {
        const issued = token()
        await storage.transaction((tx) => tx.insert('tokens', issued))
        expect(await storage.findCredential(issued.token_id)).toMatchObject({ token: { state: 'active' } })
        const [{ generation: kept }] = await admin`DELETE FROM credential_generation RETURNING generation`
        try {
          expect(await storage.findCredential(issued.token_id)).toMatchObject({ token: { state: 'active' } })
          await admin`UPDATE tokens SET state = 'revoked' WHERE token_id = ${issued.token_id}`
          expect(await storage.findCredential(issued.token_id)).toMatchObject({ token: { state: 'revoked' } })
        } finally {
          await admin`INSERT INTO credential_generation (generation) VALUES (${Number(kept) + 1000})`
        }
      })

      test('the generation advances with a change of a token or an organization, at its commit; other changes leave it', async () => {
        const before = await generation()
        await storage.transaction(async (tx) => {
          await tx.insert('consumers', consumer())
          await tx.insert('organizations', organization())
          await tx.insert('tokens', token())
        })
        expect(await generation()).toBe(before)
        const issued = await storage.transaction((tx) => tx.insert('tokens', token()))
        const connection = await admin.reserve()
        try {
          await connection`BEGIN`
          await connection`UPDATE tokens SET state = 'revoked' WHERE token_id = ${issued.token_id}`
          expect(await generation()).toBe(before)
          await connection`COMMIT`
        } finally {
          connection.release()
        }
        expect(await generation()).toBeGreaterThan(before)
      })

      test('a counter set back (a restore, a failover that lost commits): a credential remembered before is not answered once revoked', async () => {
        const issued = token()
        await storage.transaction((tx) => tx.insert('tokens', issued))
        // Remembered at a generation far above what one change brings the counter back up to.
        await admin`UPDATE credential_generation SET generation = 1000000000000`
        expect(await storage.findCredential(issued.token_id)).toMatchObject({ token: { state: 'active' } })
        expect(await storage.findCredential(issued.token_id)).toMatchObject({ token: { state: 'active' } })
        await admin`UPDATE credential_generation SET generation = 0`
        await admin`UPDATE tokens SET state = 'revoked' WHERE token_id = ${issued.token_id}`
        expect(await storage.findCredential(issued.token_id)).toMatchObject({ token: { state: 'revoked' } })
      })
    })

    test('an event keeps its changes as recorded: field order, nested values, nulls', async () => {
      const changes = {
        state: ['active', 'suspended'],
        environments: [null, { default: 'PROD', supported: ['DEV', 'PROD'] }],
        description: ['a "quoted" 100%', null],
        modified: ['2026-01-01 00:00:00.000000 +00:00', '2026-01-02 00:00:00.000000 +00:00'],
      } as const
      const recorded = await storage.transaction((tx) => tx.insert('audit_events', event({ changes, actor_organization_id: null, actor_token_id: null, actor_role: null, actor_cli: 'init', trace_id: null, customer_id: null })))
      const found = (await storage.find('audit_events', recorded.event_id))!
      expect(found).toEqual(recorded)
      expect(found.changes).toEqual(changes)
      expect(Object.keys(found.changes)).toEqual(Object.keys(changes))
    })

    test("events by target, customer, actor token and action, within a time range, in time order", async () => {
      const mine = crypto.randomUUID()
      const target = crypto.randomUUID()
      const actor = crypto.randomUUID()
      const made: { event_id: string; created: number }[] = []
      for (const action of ['consumer.create', 'consumer.suspend', 'consumer.activate'] as const) {
        // Separate transactions: separate times, in order.
        made.push(await storage.transaction((tx) => tx.insert('audit_events', event({ action, target_id: target, customer_id: mine, actor_token_id: actor }))))
      }
      await storage.transaction((tx) => tx.insert('audit_events', event({ customer_id: mine }))) // another target, another actor
      const ids = async (where: ListQuery<'audit_events'>['where'], order: 'asc' | 'desc' = 'asc') =>
        (await storage.list({ table: 'audit_events', where: [{ field: 'customer_id', in: [mine] }, ...where], order })).items.map((e) => e.event_id)
      const all = made.map((e) => e.event_id)
      expect(await ids([{ field: 'target_id', in: [target] }])).toEqual(all)
      expect(await ids([{ field: 'target_id', in: [target] }], 'desc')).toEqual([...all].reverse())
      expect(await ids([{ field: 'actor_token_id', in: [actor] }])).toEqual(all)
      expect(await ids([{ field: 'action', in: ['consumer.suspend', 'consumer.activate'] }, { field: 'target_id', in: [target] }])).toEqual(all.slice(1))
      expect(await ids([{ field: 'target_id', in: [target] }, { field: 'created', from: made[1]!.created, until: made[1]!.created }])).toEqual([all[1]!])
      expect(await ids([{ field: 'target_id', in: [target] }, { field: 'created', from: made[1]!.created }])).toEqual(all.slice(1))
    })

    test('purgeAuditEvents drops the oldest events before a time, at most `limit` at once, and nothing newer', async () => {
      await admin`DELETE FROM audit_events`
      const base = 1_000_000_000_000_000 // far in the past, well before every other event
      const events = []
      for (let i = 0; i < 7; i++) events.push(await storage.transaction((tx) => tx.insert('audit_events', event())))
      for (const [i, e] of events.entries()) await admin`UPDATE audit_events SET created = ${base + i}, modified = ${base + i} WHERE event_id = ${e.event_id}`
      expect(await storage.purgeAuditEvents(base + 5, 2)).toBe(2)
      expect(await storage.purgeAuditEvents(base + 5, 2)).toBe(2)
      expect(await storage.purgeAuditEvents(base + 5, 2)).toBe(1)
      expect(await storage.purgeAuditEvents(base + 5, 2)).toBe(0)
      const left = await storage.list({ table: 'audit_events', where: [], order: 'asc' })
      expect(left.items.map((e) => e.event_id)).toEqual(events.slice(5).map((e) => e.event_id))
    })

    test('purges by two instances at once drop each old event once', async () => {
      await admin`DELETE FROM audit_events`
      const old = 1_000_000_000_000_000
      for (let batch = 0; batch < 4; batch++) {
        await storage.transaction(async (tx) => {
          for (let i = 0; i < 50; i++) await tx.insert('audit_events', event())
        })
      }
      await admin`UPDATE audit_events SET created = ${old}`
      const other = PostgresStorage.connect(db.url, { maxConnections: 2 })
      try {
        const purge = async (instance: PostgresStorage) => {
          let dropped = 0
          for (let count = -1; count !== 0; dropped += count) count = await instance.purgeAuditEvents(old + 1, 10)
          return dropped
        }
        const [a, b] = await Promise.all([purge(storage), purge(other)])
        expect(a + b).toBe(200)
        expect((await storage.list({ table: 'audit_events', where: [], order: 'asc' })).total).toBe(0)
      } finally {
        await other.close()
      }
    })
  })

  describe('a lost database', () => {
    test('connections closed by the server: the next read and transaction still succeed', async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
      expect(await storage.find('consumers', record.consumer_id)).toEqual(record)
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
      expect((await storage.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' }))).state).toBe('suspended')
    })

    test('connections closed by the server: a remembered credential is still confirmed (the generation read reconnects)', async () => {
      const issued = await storage.transaction((tx) =>
        tx.insert('tokens', { token_id: crypto.randomUUID(), organization_id: customer, role: 'viewer', description: null, state: 'active', expires: Date.now() * 1000 + 3_600_000_000, token_hash: 'ef'.repeat(32) }),
      )
      const remembered = await storage.findCredential(issued.token_id)
      expect(await storage.findCredential(issued.token_id)).toBe(remembered!) // answered from memory
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
      expect(await storage.findCredential(issued.token_id)).toBe(remembered!)
    })

    test('a database that refuses connections, or was dropped: reads and transactions are DatabaseUnavailableError', async () => {
      const other = await createTestDatabase()
      const name = new URL(other.url).pathname.slice(1)
      const instance = PostgresStorage.connect(other.url)
      const unavailable = async () => {
        expect(await Promise.resolve(instance.find('consumers', crypto.randomUUID())).catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError)
        expect(await instance.transaction((tx) => tx.insert('consumers', consumer())).catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError)
      }
      try {
        await instance.underMigrationLock(async () => {})
        await admin.unsafe(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`)
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${name}`
        await unavailable() // 55000: not accepting connections
        await admin.unsafe(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`)
        expect(await instance.find('consumers', crypto.randomUUID())).toBeUndefined() // back by itself
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${name}`
        await admin.unsafe(`DROP DATABASE ${name} WITH (FORCE)`)
        await unavailable() // 3D000: no such database
      } finally {
        await instance.close()
        await other.drop()
      }
    })

    test('a database that stops answering: reads and transactions are DatabaseUnavailableError after the answer timeout; the abandoned change is rolled back; it works again once answers come', async () => {
      const relay = pausableRelay(db.url)
      const hanging = PostgresStorage.connect(relay.url, { answerTimeoutMs: 1000 })
      try {
        const record = await hanging.transaction((tx) => tx.insert('consumers', consumer()))
        const issued = await hanging.transaction((tx) =>
          tx.insert('tokens', { token_id: crypto.randomUUID(), organization_id: customer, role: 'viewer', description: null, state: 'active', expires: Date.now() * 1000 + 3_600_000_000, token_hash: 'ab'.repeat(32) }),
        )
        expect(await hanging.findCredential(issued.token_id)).toBeDefined()
        relay.pause()
        const unanswered = (work: () => unknown) => Promise.resolve().then(work).catch((error) => error)
        expect(await unanswered(() => hanging.find('consumers', record.consumer_id))).toBeInstanceOf(DatabaseUnavailableError)
        // A remembered credential waits for a read of the generation: that one is bounded too.
        expect(await unanswered(() => hanging.findCredential(issued.token_id))).toBeInstanceOf(DatabaseUnavailableError)
        expect(await unanswered(() => hanging.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' })))).toBeInstanceOf(DatabaseUnavailableError)
        relay.resume()
        // The change's connection was closed at the deadline, before its COMMIT: nothing of it holds.
        expect((await hanging.find('consumers', record.consumer_id))?.state).toBe('active')
        expect((await hanging.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' }))).state).toBe('suspended')
        expect(await hanging.findCredential(issued.token_id)).toBeDefined()
      } finally {
        await hanging.close()
        relay.close()
      }
    })

    test('a read past its deadline is cancelled by the database too (statement_timeout): no work goes on that nobody will read', async () => {
      const late = PostgresStorage.connect(db.url, { answerTimeoutMs: 1000 })
      const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
      expect(await late.find('consumers', record.consumer_id)).toEqual(record) // its connection made first
      const waitingReads = async () =>
        Number((await admin`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT%consumers%'`)[0].n)
      try {
        await admin.begin(async (locked) => {
          // Reads wait for an ACCESS EXCLUSIVE lock: keyward's read waits, then its answer timeout passes.
          await locked`LOCK TABLE consumers IN ACCESS EXCLUSIVE MODE`
          expect(await late.find('consumers', record.consumer_id).catch((error) => error)).toBeInstanceOf(DatabaseUnavailableError)
          // Still holding the lock: the database stops the read by itself, within moments.
          await waitFor('the database to cancel the read', async () => (await waitingReads()) === 0)
        })
      } finally {
        await late.close()
      }
    })

    test('lists are planned for their own values, on connections of their own; the others keep cached plans (docs/storage.md, "Plans")', async () => {
      const pools = storage as unknown as { sql: SQL; listSql: SQL }
      expect((await pools.listSql`SHOW plan_cache_mode`)[0].plan_cache_mode).toBe('force_custom_plan')
      expect((await pools.sql`SHOW plan_cache_mode`)[0].plan_cache_mode).toBe('auto')
      for (const pool of [pools.sql, pools.listSql]) expect((await pool`SHOW statement_timeout`)[0].statement_timeout).toBe('10s')
    })

    test('a transaction past its deadline is rolled back, its row locks freed: what its body does after that is never committed', async () => {
      const late = PostgresStorage.connect(db.url, { answerTimeoutMs: 1000 })
      try {
        // Its connection made first, within its own deadline (a loaded machine may take a while).
        const record = await storage.transaction((tx) => tx.insert('consumers', consumer()))
        expect(await late.find('consumers', record.consumer_id)).toEqual(record)
        let deadlinePassed!: () => void
        const afterDeadline = new Promise<void>((resolve) => (deadlinePassed = resolve))
        let bodyEnded!: () => void
        const ended = new Promise<void>((resolve) => (bodyEnded = resolve))
        const abandoned = late.transaction(async (tx) => {
          try {
            await tx.find('consumers', record.consumer_id, 'update') // holds the row's lock
            await afterDeadline // the body goes on only once the caller was answered 503
            return await tx.update('consumers', record.consumer_id, { state: 'suspended' })
          } finally {
            bodyEnded()
          }
        })
        expect(await abandoned.catch((error) => error)).toBeInstanceOf(DatabaseUnavailableError)
        deadlinePassed()
        await ended
        // Had its connection stayed open, this lock would wait for its COMMIT and read `suspended`.
        const seen = await storage.transaction(async (tx) => (await tx.find('consumers', record.consumer_id, 'update'))!.state)
        expect(seen).toBe('active')
      } finally {
        await late.close()
      }
    })

    test('a change that waited past the answer timeout for a connection of the pool never runs, and gives the connection back', async () => {
      const relay = pausableRelay(db.url)
      // The smallest pool: two connections for changes and reads (and one for lists). A deadline
      // that a loaded machine still meets when it opens the pool's connections again at the end.
      const hanging = PostgresStorage.connect(relay.url, { answerTimeoutMs: 3000, maxConnections: 1 })
      /** Two transactions that each hold a connection at once (so the pool has opened both). */
      const bothHolding = (record: { consumer_id: string }) => {
        let arrived = 0
        let bothIn!: () => void
        const both = new Promise<void>((resolve) => (bothIn = resolve))
        return Promise.allSettled(
          [0, 1].map(() =>
            hanging.transaction(async (tx) => {
              if (++arrived === 2) bothIn()
              await both
              return tx.find('consumers', record.consumer_id)
            }),
          ),
        )
      }
      try {
        const record = await hanging.transaction((tx) => tx.insert('consumers', consumer()))
        // Both connections open before the relay stops: a connection still to be made through it
        // would never start its holder's body (the test then waited for it past its deadline).
        await bothHolding(record)
        relay.pause()
        // The pool's two connections are these transactions', which wait for an answer...
        const holders = [0, 1].map(() => {
          let reserved!: () => void
          const holding = new Promise<void>((resolve) => (reserved = resolve))
          const done = hanging.transaction(async (tx) => {
            reserved()
            return await tx.find('consumers', record.consumer_id)
          })
          return { holding, done }
        })
        await Promise.all(holders.map((holder) => holder.holding))
        // ...so this change waits for a connection, past its deadline: answered 503, it must never run.
        let ran = false
        const late = hanging.transaction((tx) => {
          ran = true
          return tx.update('consumers', record.consumer_id, { state: 'suspended' })
        })
        // All three fail at about the same moment: each is caught at once.
        const outcomes = await Promise.all([...holders.map((holder) => holder.done), late].map((change) => change.catch((error: unknown) => error)))
        for (const outcome of outcomes) expect(outcome).toBeInstanceOf(DatabaseUnavailableError)
        relay.resume()
        // The pool's connections serve their waiters in turn: by this read, the late reservation had one.
        expect((await hanging.find('consumers', record.consumer_id))?.state).toBe('active')
        expect(ran).toBe(false)
        // Had the late reservation kept its connection, these two could not each hold one at once.
        const held = await bothHolding(record)
        expect(held.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value?.state : String(outcome.reason)))).toEqual(['active', 'active'])
      } finally {
        await hanging.close()
        relay.close()
      }
    })

    test('a server that cannot be reached: reads and transactions are DatabaseUnavailableError', async () => {
      const url = new URL(db.url)
      url.port = '1' // nothing listens there
      const nowhere = PostgresStorage.connect(url.toString())
      try {
        expect(await Promise.resolve(nowhere.find('consumers', crypto.randomUUID())).catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError)
        expect(await nowhere.transaction((tx) => tx.insert('consumers', consumer())).catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError)
      } finally {
        await nowhere.close()
      }
    })
  })
})
