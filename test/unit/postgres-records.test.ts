/**
 * The PostgreSQL storage's records (docs/storage.md, "PostgreSQL"): what is written is read back,
 * timestamps, and uniqueness under concurrency.
 * Skipped where no database server answers (README, "Database mode"); the set-up is test/support/postgres-storage.ts `createTestStorage`.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { SQL } from 'bun'
import { PostgresStorage } from '../../src/storage/postgres'
import { EVENTS_PER_STATEMENT } from '../../src/storage/postgres/statements'
import { UniqueViolation } from '../../src/storage/storage'
import { recordEvent } from '../../src/modules/shared/audit'
import { databaseTestsCanRun } from '../support/database'
import { createTestStorage, freshConsumer, freshEnrollment, freshEvent, TEST_CUSTOMER as customer } from '../support/postgres-storage'

const reachable = await databaseTestsCanRun()

describe.skipIf(!reachable)('PostgreSQL storage', () => {
  let storage: PostgresStorage
  let admin: SQL
  let close = async () => {}
  beforeAll(async () => ({ storage, admin, close } = await createTestStorage()))
  afterAll(() => close())

  describe('records and timestamps', () => {
    test('insert sets created = modified from the database clock; find and findMany read it back', async () => {
      const before = Date.now() * 1000
      const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
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
      const enrolled = await storage.transaction((tx) => tx.insert('enrollments', freshEnrollment({ application_id: application.application_id })))
      const link = { field: 'application_id', table: 'applications' } as const
      // The same records as `find` reads, each with its own field types (text[], bigint).
      expect(await storage.findWithParent('enrollments', enrolled.enrollment_id, link)).toEqual({ record: enrolled, parent: application })
      const orphan = await storage.transaction((tx) => tx.insert('enrollments', freshEnrollment()))
      expect(await storage.findWithParent('enrollments', orphan.enrollment_id, link)).toEqual({ record: orphan, parent: undefined })
      expect(await storage.findWithParent('enrollments', crypto.randomUUID(), link)).toBeUndefined()
      expect(await storage.findWithParent('enrollments', enrolled.enrollment_id.toUpperCase(), link)).toBeUndefined()
    })

    test('`within`: a record that does not meet it is answered like a missing one, by the statement itself', async () => {
      const owner = crypto.randomUUID()
      const record = await storage.transaction((tx) => tx.insert('consumers', { ...freshConsumer(), organization_id: owner }))
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
      const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
      for (const id of ['constructor', '', record.consumer_id.toUpperCase()]) {
        expect(await storage.find('consumers', id)).toBeUndefined()
        expect(await storage.transaction(async (tx) => tx.find('consumers', id, 'update'))).toBeUndefined()
        expect(await storage.list({ table: 'consumers', where: [{ field: 'consumer_id', in: [id] }], order: 'asc' })).toEqual({ items: [], total: 0 })
      }
      expect(await storage.findMany('consumers', ['constructor', record.consumer_id])).toEqual([undefined, record])
    })

    test('modified strictly increases, even past a clock that is behind it', async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
      const future = record.modified + 3_600_000_000 // as if another instance's change was an hour ahead
      await admin`UPDATE consumers SET modified = ${future} WHERE consumer_id = ${record.consumer_id}`
      const changed = await storage.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' }))
      expect(changed.modified).toBe(future + 1)
      expect(changed.created).toBe(record.created)
      const again = await storage.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'active' }))
      expect(again.modified).toBe(future + 2)
    })

    test("a change's audit event takes the record's time, even when its modified is past the transaction's start", async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
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
          await tx.insert('consumers', freshConsumer(id))
          throw failure
        }),
      ).rejects.toBe(failure)
      expect(await storage.find('consumers', id)).toBeUndefined()
    })

    test('an appended event commits with its change; one that fails fails the change, and nothing is committed', async () => {
      const kept = freshEvent()
      const record = await storage.transaction(async (tx) => {
        const inserted = await tx.insert('consumers', freshConsumer())
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
          const inserted = await tx.insert('consumers', freshConsumer(id))
          tx.appendEvent({ ...freshEvent(), event_id: kept.event_id }, inserted.modified)
          return 'returned'
        })
        .catch((error) => error)
      expect(failed).toBeInstanceOf(Error)
      expect(failed.errno).toBe('23505')
      expect(await storage.find('consumers', id)).toBeUndefined()
    })

    test('the events of one change go in as few statements as EVENTS_PER_STATEMENT allows, every one of them kept', async () => {
      const events = Array.from({ length: EVENTS_PER_STATEMENT * 2 + 1 }, () => freshEvent())
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
          const inserted = await tx.insert('consumers', freshConsumer())
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
      const taken = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
      const id = crypto.randomUUID()
      const failed = await storage
        .transaction(async (tx) => {
          await tx.insert('consumers', freshConsumer(id))
          await tx.insert('consumers', { ...freshConsumer(), consumer_id: taken.consumer_id }).catch(() => undefined)
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
      const first = await storage.transaction((tx) => tx.insert('enrollments', freshEnrollment()))
      const sameKey = await storage.transaction((tx) => tx.insert('enrollments', freshEnrollment({ enrollment_id: first.enrollment_id }))).catch((e) => e)
      expect(sameKey).toBeInstanceOf(UniqueViolation)
      expect(sameKey.rule).toBe('primary_key')
      const { enrollment_id: _, ...tuple } = first
      const sameTuple = await storage.transaction((tx) => tx.insert('enrollments', freshEnrollment({ ...tuple, enrollment_id: crypto.randomUUID() }))).catch((e) => e)
      expect(sameTuple).toBeInstanceOf(UniqueViolation)
      expect(sameTuple.rule).toBe('enrollment_tuple')
    })

    test('insertIfAbsent at once from many connections: one inserts, the others get that record', async () => {
      const id = crypto.randomUUID()
      const results = await Promise.all(Array.from({ length: 8 }, () => storage.transaction((tx) => tx.insertIfAbsent('consumers', freshConsumer(id)))))
      expect(results.filter((r) => r.inserted)).toHaveLength(1)
      const created = results.find((r) => r.inserted)!.record
      for (const r of results) expect(r.record).toEqual(created)
    })

    test('concurrent enrollments of one tuple: one inserted; the same id is returned, another id is the tuple rule', async () => {
      const tuple = freshEnrollment()
      const sameId = await Promise.all(Array.from({ length: 6 }, () => storage.transaction((tx) => tx.insertIfAbsent('enrollments', tuple))))
      expect(sameId.filter((r) => r.inserted)).toHaveLength(1)
      expect(new Set(sameId.map((r) => r.record.enrollment_id))).toEqual(new Set([tuple.enrollment_id]))

      const fresh = freshEnrollment()
      const outcomes = await Promise.allSettled(
        Array.from({ length: 6 }, () => storage.transaction((tx) => tx.insertIfAbsent('enrollments', { ...fresh, enrollment_id: crypto.randomUUID() }))),
      )
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1)
      for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ name: 'UniqueViolation', rule: 'enrollment_tuple' })
    })
  })

})
