/**
 * The PostgreSQL storage's lists (docs/storage.md, "PostgreSQL"): conditions, paging, order and plans.
 * Skipped where no database server answers (README, "Database mode"); the set-up is test/support/postgres-storage.ts `createTestStorage`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { PostgresStorage } from '../../src/storage/postgres'
import type { Condition, ListQuery } from '../../src/storage/storage'
import { databaseTestsCanRun } from '../support/database'
import { createTestStorage, freshConsumer, freshEnrollment, listPlan } from '../support/postgres-storage'

const reachable = await databaseTestsCanRun()

describe.skipIf(!reachable)('PostgreSQL storage', () => {
  let storage: PostgresStorage
  let admin: SQL
  let close = async () => {}
  beforeAll(async () => ({ storage, admin, close } = await createTestStorage()))
  afterAll(() => close())

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
        for (let i = 0; i < 3; i++) made.push(await tx.insert('consumers', freshConsumer(crypto.randomUUID(), owner)))
        return made
      })
      sameTime = three.map((c) => c.consumer_id).sort()
    })

    const installations = (where: ListQuery<'installations'>['where'], extra: Partial<ListQuery<'installations'>> = {}) =>
      storage.list({ table: 'installations', scope: owner, where, order: 'asc', ...extra })

    test('in creation order, desc reversed, scoped to the owner', async () => {
      expect((await installations([])).items.map((r) => r.installation_id)).toEqual(ids)
      expect((await installations([], { order: 'desc' })).items.map((r) => r.installation_id)).toEqual([...ids].reverse())
      // The three made at one time (before every test: first in creation order), then any a test made since.
      const consumers = await storage.list({ table: 'consumers', scope: owner, where: [], order: 'asc' })
      expect(consumers.items.slice(0, 3).map((c) => c.consumer_id)).toEqual(sameTime)
      expect(consumers.items.every((c) => c.organization_id === owner)).toBe(true)
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
        await tx.insert('consumers', freshConsumer(c1, owner))
        await tx.insert('consumers', freshConsumer(c2, owner))
        await tx.insert('enrollments', freshEnrollment({ organization_id: owner, consumer_id: c1, installation_id: ids[0]!, application_id: application }))
        await tx.insert('enrollments', freshEnrollment({ organization_id: owner, consumer_id: c1, installation_id: ids[2]!, application_id: application }))
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
        for (let i = 0; i < 30; i++) await tx.insert('enrollments', freshEnrollment({ organization_id: owner, application_id: (i + k) % 3 === 0 ? other : application }))
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
      const plan = await listPlan(admin, { table: 'enrollments', scope: owner, where: [{ field: 'application_id', in: [application] }], page: { number: 1, size: 25 }, order: 'asc' })
      expect(plan).toContain('"Relation Name":"enrollment_counts"')
      expect(plan.match(/"Relation Name":"enrollments"/g)).toHaveLength(1) // the page's rows only
    })
  })
})
