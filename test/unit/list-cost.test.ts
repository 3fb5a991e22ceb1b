/**
 * What a list costs (docs/storage.md, docs/security.md): the records it reads follow what it may
 * return, never another tenant's data, and a long walk yields to other requests. Counted with the
 * embedded planner's work counters, never timed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'
import { plannerWork, WALK_CHUNK } from '../../src/storage/embedded/planner'

let h: Harness
/** The other tenant: one application with many enrollments (their consumers and installations). */
let other: { customer: string; app: string; enrollment: string; consumer: string; installation: string }
let mine: { customer: string; token: string; app: string }
const OTHER_ENROLLMENTS = 3 * WALK_CHUNK

/** Enrollments with their consumers and installations, written straight through the storage. */
async function enrollMany(customer: string, app: string, count: number): Promise<{ enrollment: string; consumer: string; installation: string }> {
  let last = { enrollment: '', consumer: '', installation: '' }
  await h.storage.transaction(async (tx) => {
    for (let n = 0; n < count; n++) {
      last = { enrollment: crypto.randomUUID(), consumer: crypto.randomUUID(), installation: crypto.randomUUID() }
      await tx.insert('consumers', { consumer_id: last.consumer, organization_id: customer, state: 'active' })
      await tx.insert('installations', { installation_id: last.installation, organization_id: customer, description: 'phone', state: 'unregistered' })
      await tx.insert('enrollments', {
        enrollment_id: last.enrollment,
        organization_id: customer,
        consumer_id: last.consumer,
        installation_id: last.installation,
        application_id: app,
        environment: 'PRODUCTION',
        active_keyset_id: null,
        client_enclave_key: null,
        state: 'active',
      })
    }
  })
  return last
}

async function createApp(customer: string): Promise<string> {
  const res = await h.request('POST', '/api/applications', { body: { organization_id: customer, description: 'app' } })
  return res.body.application.application_id
}

/** The records the planner read to answer `path` for `token`, and the answer. */
async function cost(path: string, token: string) {
  const before = plannerWork.recordsRead
  const res = await h.request('GET', path, { token })
  return { read: plannerWork.recordsRead - before, res }
}

beforeAll(async () => {
  h = await createHarness()
  const otherCustomer = await h.createCustomer('Other')
  const otherApp = await createApp(otherCustomer)
  other = { customer: otherCustomer, app: otherApp, ...(await enrollMany(otherCustomer, otherApp, OTHER_ENROLLMENTS)) }
  const customer = await h.createCustomer('Mine')
  mine = { customer, token: h.token(customer, 'viewer'), app: await createApp(customer) }
  await enrollMany(customer, mine.app, 3)
})

afterAll(() => h.close())

describe("another tenant's identifiers in a filter cost nothing", () => {
  // Before, the filter's estimate and candidates counted the other tenant's rows first: an empty
  // page whose time grew with that tenant's data (a cross-tenant timing oracle).
  const filters = [
    ['consumers', 'application_ids', () => other.app],
    ['consumers', 'installation_ids', () => other.installation],
    ['consumers', 'enrollment_ids', () => other.enrollment],
    ['consumers', 'consumer_ids', () => other.consumer],
    ['consumers', 'organization_ids', () => other.customer],
    ['installations', 'application_ids', () => other.app],
    ['installations', 'consumer_ids', () => other.consumer],
    ['installations', 'enrollment_ids', () => other.enrollment],
    ['installations', 'installation_ids', () => other.installation],
    ['enrollments', 'application_ids', () => other.app],
    ['enrollments', 'consumer_ids', () => other.consumer],
    ['enrollments', 'organization_ids', () => other.customer],
  ] as const
  for (const [list, filter, id] of filters) {
    test(`${list}?${filter}=<theirs>: an empty page, no record read`, async () => {
      const { read, res } = await cost(`/api/${list}?${filter}=${id()}&page=1`, mine.token)
      expect(res.status).toBe(200)
      expect(res.body.total).toBe(0)
      expect(read).toBe(0)
    })
  }

  test('mixed with an own identifier: only the own one is read', async () => {
    const { read, res } = await cost(`/api/consumers?application_ids=${other.app},${mine.app}&page=1`, mine.token)
    expect(res.body.total).toBe(3)
    expect(read).toBe(3)
  })
})

describe('long walks and long lists', () => {
  test('a state-only filter over a large scope yields between chunks and counts every match', async () => {
    const yielded = plannerWork.turnsYielded
    const { res } = await cost(`/api/consumers?state=active&page=2&page_size=10`, h.token(other.customer, 'viewer'))
    expect(res.body.total).toBe(OTHER_ENROLLMENTS)
    expect(res.body.consumers).toHaveLength(10)
    expect(plannerWork.turnsYielded - yielded).toBeGreaterThanOrEqual(Math.floor(OTHER_ENROLLMENTS / WALK_CHUNK) - 1)
  })

  test('one index list pages by slicing: a page of an application reads only its records', async () => {
    const { read, res } = await cost(`/api/enrollments?application_ids=${other.app}&page=3&page_size=25`, h.token(other.customer, 'viewer'))
    expect(res.body.total).toBe(OTHER_ENROLLMENTS)
    expect(res.body.enrollments).toHaveLength(25)
    expect(read).toBe(25)
  })

  test('the keyset list: whole, it reads each keyset once; a page reads its records only, whatever the enrollment holds', async () => {
    const enrollment = other.enrollment
    await h.storage.transaction(async (tx) => {
      for (let n = 0; n < 500; n++) {
        await tx.insert('keysets', {
          keyset_id: crypto.randomUUID(),
          enrollment_id: enrollment,
          application_id: other.app,
          environment: 'PRODUCTION',
          client_enclave_key: 'key',
          state: 'retired',
        })
      }
    })
    const token = h.token(other.customer, 'viewer')
    const whole = await cost(`/api/enrollments/${enrollment}/keysets`, token)
    expect(Object.keys(whole.res.body).sort()).toEqual(['keysets', 'trace_id'])
    expect(whole.res.body.keysets).toHaveLength(500)
    expect(whole.read).toBe(500)
    const first = await cost(`/api/enrollments/${enrollment}/keysets?page=1`, token)
    expect(first.res.body).toMatchObject({ total: 500, page: 1, page_size: 100 })
    expect(first.res.body.keysets).toHaveLength(100)
    expect(first.read).toBe(100)
    const last = await cost(`/api/enrollments/${enrollment}/keysets?page=3&page_size=200&order=desc`, token)
    expect(last.res.body).toMatchObject({ total: 500, page: 3, page_size: 200 })
    expect(last.res.body.keysets).toHaveLength(100)
    const past = await cost(`/api/enrollments/${enrollment}/keysets?page=9`, token)
    expect(past.res.body).toMatchObject({ keysets: [], total: 500, page: 9 })
  })
})
