/**
 * Answers of megabytes (docs/security.md, "Big answers"): a list whose records hold long escaped
 * descriptions is written as bytes in turns of the event loop (src/http/json-bytes.ts), and is the
 * same JSON, length and log line as a small one, on both stores.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'
import { BYTES_IN_TURNS_ABOVE_CHARS } from '../../src/http/json-bytes'

let h: Harness
let customer: string
let token: string
/** 1,024 characters that are 6,139 bytes of JSON (each U+0001 is `\u0001`). */
const HEAVY = 'a' + '\u0001'.repeat(1023)
const COUNT = 200

beforeAll(async () => {
  h = await createHarness()
  customer = await h.createCustomer('Heavy')
  token = h.token(customer, 'admin')
  for (let i = 0; i < COUNT; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, COUNT - i) }, () =>
        h.request('POST', '/api/installations', { token, body: { installation_id: crypto.randomUUID(), description: HEAVY } }),
      ),
    )
  }
})
afterAll(() => h.close())

test('a list of megabytes is whole JSON: every record, and bytes_out the body\'s bytes', async () => {
  for (const query of ['page=1&page_size=1000', 'page_size=1000']) {
    h.logged.length = 0
    await h.tokensRecorded()
    const response = await h.app.handle(new Request(`http://localhost/api/installations?${query}`, { headers: { authorization: `Bearer ${token}` } }))
    const bytes = new Uint8Array(await response.arrayBuffer())
    expect(bytes.length).toBeGreaterThan(BYTES_IN_TURNS_ABOVE_CHARS) // the path under test
    expect(response.status).toBe(200)
    const body = JSON.parse(new TextDecoder().decode(bytes))
    expect(body.installations).toHaveLength(COUNT)
    expect(body.installations.every((installation: { description: string }) => installation.description === HEAVY)).toBe(true)
    expect(new Set(body.installations.map((installation: { installation_id: string }) => installation.installation_id)).size).toBe(COUNT)
    if (query.startsWith('page=')) expect([body.total, body.page, body.page_size]).toEqual([COUNT, 1, 1000])
    else expect(body.trace_id).toBe(response.headers.get('x-trace-id'))
    const line = h.logged.map((text) => JSON.parse(text)).find((entry) => entry.msg === 'request' && entry.route === '/api/installations')
    expect(line).toMatchObject({ status: 200, bytes_out: bytes.length })
  }
})

test('the audit trail of those records too: every event, whole', async () => {
  const response = await h.request('GET', '/api/audit-events?page_size=1000&actions=installation.create', { token })
  expect(response.status).toBe(200)
  expect(response.body.audit_events).toHaveLength(COUNT)
  expect(response.body.audit_events.every((event: { changes: { description: [null, string] } }) => event.changes.description[1] === HEAVY)).toBe(true)
})

test("another tenant's read by id is answered while big pages are being written, not after them (docs/security.md, \"Big answers\")", async () => {
  const other = await h.createCustomer('Light')
  const otherToken = h.token(other, 'admin')
  const installationId = crypto.randomUUID()
  expect((await h.request('POST', '/api/installations', { token: otherToken, body: { installation_id: installationId, description: 'light' } })).status).toBe(201)
  await h.tokensRecorded()
  const finished: string[] = []
  const answered = (name: string, request: Request) =>
    Promise.resolve(h.app.handle(request)).then(async (response) => {
      expect(response.status).toBe(200)
      await response.arrayBuffer()
      finished.push(name)
    })
  // Pages of a thousand audit events: decoded and built for each page (tens of ms), so they take
  // several slices on any machine. Pages of installations are spliced from remembered texts: on a
  // fast machine each fitted in its first slice, all four were answered before the read began, and
  // the read ended last (a CI failure, 2026-11-30).
  const bigPages = Array.from({ length: 4 }, (_, i) =>
    answered(`big ${i}`, new Request('http://localhost/api/audit-events?page_size=1000&actions=installation.create', { headers: { authorization: `Bearer ${token}` } })),
  )
  const read = answered('read', new Request(`http://localhost/api/installations/${installationId}`, { headers: { authorization: `Bearer ${otherToken}` } }))
  await Promise.all([...bigPages, read])
  // Begun after all four, it is not the last to end: the pages were written in turns (src/ops/turns.ts).
  expect(finished.indexOf('read')).toBeLessThan(finished.length - 1)
})
