/**
 * The PostgreSQL storage's tokens and audit events (docs/storage.md, "PostgreSQL" and "Credentials"):
 * retention's delete, and credentials changed by another connection never answered from memory.
 * Skipped where no database server answers (README, "Database mode"); the set-up is test/support/postgres-storage.ts `createTestStorage`.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { SQL } from 'bun'
import { PostgresStorage } from '../../src/storage/postgres'
import * as statements from '../../src/storage/postgres/statements'
import type { AuditEvent } from '../../src/storage/records'
import type { Fresh, ListQuery, Page } from '../../src/storage/storage'
import { newSlice } from '../../src/ops/turns'
import { databaseTestsCanRun, pausableRelay, type TestDatabase } from '../support/database'
import { createTestStorage, freshConsumer, freshEvent, listPlan, TEST_CUSTOMER as customer } from '../support/postgres-storage'
import { turnsDuring } from '../support/event-loop'

const reachable = await databaseTestsCanRun()

describe.skipIf(!reachable)('PostgreSQL storage', () => {
  let db: TestDatabase
  let storage: PostgresStorage
  let admin: SQL
  let close = async () => {}
  beforeAll(async () => ({ db, storage, admin, close } = await createTestStorage()))
  afterAll(() => close())

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
      const stored = Array.from({ length: 300 }, () => freshEvent({ customer_id: heavy, changes: { description: [null, description], state: [null, 'active'] } }))
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
        for (let i = 0; i < 3000; i++) tx.appendEvent(freshEvent({ customer_id: busy }), time)
        // The customer's own events mostly of another action, so that only an index holding the
        // action narrows them: otherwise its (customer, target) index cost the planner about the
        // same, and won one plan in twenty. Thousands, not hundreds: with 300 of each the planner
        // costed the walk of (action, created) through the other customer's events about the same
        // (the estimate takes customer and action as independent) and chose it one run in three.
        for (let i = 0; i < 3000; i++) tx.appendEvent(freshEvent({ action: 'installation.update' }), time)
        for (let i = 0; i < 5; i++) tx.appendEvent(freshEvent(), time)
      })
      await admin`VACUUM ANALYZE audit_events`
      const plan = await listPlan(admin, { table: 'audit_events', where: [{ field: 'customer_id', in: [customer] }, { field: 'action', in: ['consumer.create'] }], page: { number: 1, size: 25 }, order: 'asc' })
      expect(plan).toContain('"Index Name":"audit_events_customer_action"')
      expect(plan).not.toContain('"Index Name":"audit_events_action"')
    })

    test("a customer's page of its events is read from its own index, in order, whatever other customers hold before it (one tenant is an equality)", async () => {
      const older = crypto.randomUUID()
      const late = crypto.randomUUID()
      await storage.transaction(async (tx) => {
        const time = await tx.time()
        for (let i = 0; i < 500; i++) tx.appendEvent(freshEvent({ customer_id: older }), time)
      })
      await storage.transaction(async (tx) => {
        const time = await tx.time()
        for (let i = 0; i < 30; i++) tx.appendEvent(freshEvent({ customer_id: late }), time)
      })
      await admin`VACUUM ANALYZE audit_events`
      const plan = (where: ListQuery<'audit_events'>['where']) => listPlan(admin, { table: 'audit_events', where, page: { number: 1, size: 25 }, order: 'asc' })
      // In order from the customer's index, no sort: the page costs its 25 rows. With `= ANY`, the
      // index gives no order: a sort of every event of the customer here, and at a million events
      // the planner walked `audit_events_created` through every older customer's instead.
      const own = await plan([{ field: 'customer_id', in: [late] }])
      expect(own).toMatch(/"Index Name":"audit_events_customer"/)
      expect(own).not.toContain('"Node Type":"Sort"')
      // Another field's one value stays `= ANY`: its matches among the customer's own events are
      // sorted, and no index of that field is walked in order through other customers' events.
      const byAction = await plan([{ field: 'customer_id', in: [late] }, { field: 'action', in: ['consumer.create'] }])
      expect(byAction).toMatch(/"Index Name":"audit_events_customer/)
      expect(byAction).not.toMatch(/"Index Name":"audit_events_(created|action)"/)
      const page = await storage.list({ table: 'audit_events', where: [{ field: 'customer_id', in: [late] }], page: { number: 1, size: 25 }, order: 'asc' })
      expect([page.total, page.items.length, page.items.every((event) => event.customer_id === late)]).toEqual([30, 25, true])
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

      test('now() never goes back: a credential read held by a lock brings its statement\'s start, older than a time learnt meanwhile', async () => {
        const held = token()
        const cached = token()
        await storage.transaction(async (tx) => (await tx.insert('tokens', held), tx.insert('tokens', cached)))
        await storage.findCredential(cached.token_id) // remembered: later reads only read the generation, with the time
        const locker = await admin.reserve()
        try {
          await locker`BEGIN`
          await locker`LOCK TABLE organizations IN ACCESS EXCLUSIVE MODE`
          const heldRead = storage.findCredential(held.token_id) // its statement begins now and waits for the lock
          const waiting = async () => (await admin`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`)[0].n > 0
          while (!(await waiting())) await Bun.sleep(5)
          // Let the database's clock move on well past the held statement's start, then learn it.
          await admin`SELECT pg_sleep(0.2)`
          await storage.findCredential(cached.token_id)
          const learnt = storage.now()
          await locker`COMMIT`
          expect(await heldRead).toMatchObject({ token: { state: 'active' } })
          expect(storage.now()).toBeGreaterThanOrEqual(learnt)
        } finally {
          await locker`ROLLBACK`.catch(() => {})
          locker.release()
        }
      })

      test("an answer that arrives late does not set now() back by its delay: what the round trip allows is kept", async () => {
        const relay = pausableRelay(db.url)
        const late = PostgresStorage.connect(relay.url, { maxConnections: 4 })
        const databaseClock = async () => Number((await admin`SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now`)[0].now)
        try {
          await late.requireCurrentSchema() // learns the database's time
          relay.delayAnswers(1000)
          await late.requireCurrentSchema() // its answer a second on the way
          relay.delayAnswers(0)
          // Taken as the time at its arrival, the answer set now() a second behind the database's clock.
          expect((await databaseClock()) - late.now()).toBeLessThan(500_000)
        } finally {
          await late.close()
          relay.close()
        }
      })

      test("now() follows the database's time on each read: a monotonic clock running fast puts it ahead by one read's interval at most, not more and more", async () => {
        const databaseTime = async () => Number((await admin`SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS now`)[0].now)
        const realNow = performance.now.bind(performance)
        const start = realNow()
        // This machine's monotonic clock twice as fast as the database's.
        const fastClock = spyOn(performance, 'now').mockImplementation(() => start + (realNow() - start) * 2)
        try {
          const ahead: number[] = []
          for (let read = 0; read < 5; read++) {
            await storage.requireCurrentSchema() // a read that brings the database's time
            await admin`SELECT pg_sleep(0.1)` // time passing, 100 ms by the database's clock (200 by the fast one)
            ahead.push(storage.now() - (await databaseTime()))
          }
          // Each read's interval puts it about 100 ms ahead, the same each time; kept as the base
          // instead, the lead grew by the interval with every read (560 ms by the fifth).
          expect(ahead.at(-1)! - ahead[0]!).toBeLessThan(200_000)
        } finally {
          fastClock.mockRestore()
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
          await tx.insert('consumers', freshConsumer())
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
      const recorded = await storage.transaction((tx) => tx.insert('audit_events', freshEvent({ changes, actor_organization_id: null, actor_token_id: null, actor_role: null, actor_cli: 'init', trace_id: null, customer_id: null })))
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
        made.push(await storage.transaction((tx) => tx.insert('audit_events', freshEvent({ action, target_id: target, customer_id: mine, actor_token_id: actor }))))
      }
      await storage.transaction((tx) => tx.insert('audit_events', freshEvent({ customer_id: mine }))) // another target, another actor
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
      for (let i = 0; i < 7; i++) events.push(await storage.transaction((tx) => tx.insert('audit_events', freshEvent())))
      for (const [i, e] of events.entries()) await admin`UPDATE audit_events SET created = ${base + i}, modified = ${base + i} WHERE event_id = ${e.event_id}`
      const writes: number[] = []
      storage.observeWrites((seconds) => writes.push(seconds))
      expect(await storage.purgeAuditEvents(base + 5, 2)).toBe(2)
      expect(await storage.purgeAuditEvents(base + 5, 2)).toBe(2)
      expect(await storage.purgeAuditEvents(base + 5, 2)).toBe(1)
      expect(await storage.purgeAuditEvents(base + 5, 2)).toBe(0)
      // Each purge that deleted is a durable write (keyward_storage_write_duration_seconds), as in the embedded store.
      expect(writes).toHaveLength(3)
      const left = await storage.list({ table: 'audit_events', where: [], order: 'asc' })
      expect(left.items.map((e) => e.event_id)).toEqual(events.slice(5).map((e) => e.event_id))
    })

    test('purges by two instances at once drop each old event once', async () => {
      await admin`DELETE FROM audit_events`
      const old = 1_000_000_000_000_000
      for (let batch = 0; batch < 4; batch++) {
        await storage.transaction(async (tx) => {
          for (let i = 0; i < 50; i++) await tx.insert('audit_events', freshEvent())
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

    test('an old event that another instance is deleting (its row locked) is skipped, not waited for', async () => {
      await admin`DELETE FROM audit_events`
      const old = 1_000_000_000_000_000
      const events: AuditEvent[] = []
      for (let i = 0; i < 3; i++) events.push(await storage.transaction((tx) => tx.insert('audit_events', freshEvent())))
      await admin`UPDATE audit_events SET created = ${old}`
      const locked = Promise.withResolvers<void>()
      const release = Promise.withResolvers<void>()
      const holder = admin.begin(async (tx) => {
        await tx`SELECT event_id FROM audit_events WHERE event_id = ${events[0]!.event_id} FOR UPDATE`
        locked.resolve()
        await release.promise
      })
      await locked.promise
      try {
        // Answered while the lock is held: a purge that waited for it would not answer before `release`.
        expect(await storage.purgeAuditEvents(old + 1, 10)).toBe(2)
      } finally {
        release.resolve()
        await holder
      }
      expect((await storage.list({ table: 'audit_events', where: [], order: 'asc' })).items.map((e) => e.event_id)).toEqual([events[0]!.event_id])
    })
  })

})
