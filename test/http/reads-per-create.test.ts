/**
 * A create reads the organization its body names once (docs/storage.md, "Round trips"): the check
 * that makes an unknown one 404 before a 403 or 400 runs only when those checks fail
 * (`namedRecordFirst`, src/http/access.ts); on the way to a success the read that finds the
 * customer is the only one. A vendor creating a customer reads no organization at all: the parent
 * it names is itself. On both stores (in database mode each read is a round trip).
 */
import { afterAll, beforeAll, expect, spyOn, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'

let h: Harness
let customer: string
beforeAll(async () => {
  h = await createHarness()
  customer = await h.createCustomer()
})
afterAll(() => h.close())

/**
 * Reads of organization `id` outside a transaction while `send` runs, the tables read inside its
 * transactions (`tx.find`), and its answer's status.
 */
async function organizationReads(id: string, send: () => Promise<{ status: number }>): Promise<{ reads: number; status: number; inTransaction: string[] }> {
  const { storage } = h
  const [find, transaction] = [storage.find.bind(storage), storage.transaction.bind(storage)]
  let inTransaction = 0
  let reads = 0
  const transactionReads: string[] = []
  // The embedded transaction's own reads go through storage.find too: those are not counted.
  const spies = [
    spyOn(storage, 'transaction').mockImplementation((body) =>
      transaction(async (tx) => {
        inTransaction++
        // The body's own reads (the embedded transaction's uniqueness checks call its find too).
        const find: typeof tx.find = (table, key, lock) => (transactionReads.push(table), tx.find(table, key, lock))
        const seen = new Proxy(tx, {
          get: (target, name) => {
            const value = name === 'find' ? find : Reflect.get(target, name, target)
            return typeof value === 'function' && value !== find ? value.bind(target) : value
          },
        })
        try {
          return await body(seen)
        } finally {
          inTransaction--
        }
      }),
    ),
    spyOn(storage, 'find').mockImplementation(((table: string, key: string) => {
      if (inTransaction === 0 && table === 'organizations' && key === id) reads++
      return find(table as never, key)
    }) as never),
  ]
  try {
    const { status } = await send()
    return { reads, status, inTransaction: transactionReads }
  } finally {
    for (const spy of spies) spy.mockRestore()
  }
}

const creates: [string, () => Record<string, unknown>][] = [
  ['/api/applications', () => ({ organization_id: customer, description: 'App' })],
  ['/api/consumers', () => ({ organization_id: customer, consumer_id: crypto.randomUUID() })],
  ['/api/installations', () => ({ organization_id: customer, installation_id: crypto.randomUUID(), description: 'Pixel 8' })],
]

for (const [path, body] of creates) {
  test(`POST ${path} naming a customer reads it once; an unknown one with a bad body is still 404`, async () => {
    expect(await organizationReads(customer, () => h.request('POST', path, { body: body() }))).toMatchObject({ reads: 1, status: 201 })
    const unknown = crypto.randomUUID()
    const refused = await organizationReads(unknown, () => h.request('POST', path, { body: { ...body(), organization_id: unknown, surplus: true } }))
    expect(refused.status).toBe(404)
  })
}

test('POST /api/organizations by the vendor for a customer reads no organization; for a partner, its customer once', async () => {
  const forCustomer = await organizationReads(h.vendorId, () => h.request('POST', '/api/organizations', { body: { description: 'C', parent_id: h.vendorId } }))
  expect(forCustomer).toEqual({ reads: 0, status: 201, inTransaction: [] })
  const forPartner = await organizationReads(customer, () => h.request('POST', '/api/organizations', { body: { description: 'P', parent_id: customer } }))
  expect(forPartner).toEqual({ reads: 0, status: 201, inTransaction: ['organizations'] })
})
