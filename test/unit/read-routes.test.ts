/**
 * Answers and changes that rest on a write not durable yet, on the embedded storage: read routes
 * (src/http/context.ts, `readRoutes`) are compiled as synchronous functions, and an answer that
 * waits for a write which then fails is still the 503 problem (Elysia's error hook never sees the
 * rejection of a handler it compiled as synchronous). A refusal waits likewise
 * (`refusalOnceDurable`, src/http/foundation.ts). A request that read before a write was undone
 * is refused even when it no longer waits for it (`StateMark`, src/storage/storage.ts): a list that
 * yielded, a change authenticated on an activation, a token command of the CLI.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { FileHandle } from 'node:fs/promises'
import { createHarness, type ApiResponse, type Harness } from '../support/harness'
import { expectProblem } from '../support/fixtures'
import { RateLimiter } from '../../src/ops/rate-limit'
import { performTokenCommand, type TokenCommand } from '../../src/cli/token-commands'
import { StorageUnavailableError } from '../../src/store/wal'

let h: Harness

beforeAll(async () => {
  h = await createHarness()
})
afterAll(() => h.close())

/**
 * Holds the next fsync of `harness`'s log until the test fails it or lets it through (later ones run
 * as usual): a write then waits in memory for it, and what saw that write waits too.
 */
function holdNextSync(harness: Harness) {
  const writer = (harness.store as unknown as { writer: { file: FileHandle } }).writer
  const good = writer.file
  let fail!: (error: Error) => void
  let release!: () => void
  const outcome = new Promise<void>((resolve, reject) => ((release = resolve), (fail = reject)))
  let syncs = 0
  writer.file = new Proxy(good, {
    get: (target, name) => (name === 'datasync' ? () => (syncs++ === 0 ? outcome.then(() => target.datasync()) : target.datasync()) : Reflect.get(target, name, target)),
  })
  return {
    /** Resolves once a write waits for the held fsync. */
    async waiting(): Promise<void> {
      while (syncs === 0) await new Promise((resolve) => setImmediate(resolve))
    },
    fail: () => fail(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })),
    release: () => release(),
    restore: () => void (writer.file = good),
  }
}

test('every GET /api route compiles to a synchronous handler', () => {
  const routes = h.app.routes.filter((route) => route.method === 'GET' && route.path.startsWith('/api/'))
  expect(routes.length).toBeGreaterThanOrEqual(13)
  const kinds = routes.map((route) => [route.path, (route as unknown as { compile(): () => unknown }).compile().constructor.name])
  expect(kinds).toEqual(routes.map((route) => [route.path, 'Function']))
})

test('a read that saw a write whose fsync then fails answers 503, not a dropped request', async () => {
  const customer = await h.createCustomer('Reader')
  const token = h.token(customer, 'admin')
  await h.tokensRecorded() // a write of its own, made durable before the log is tampered with
  // The log's next fsync is held until the read has seen the write, then fails.
  const sync = holdNextSync(h)
  try {
    const write = h.request('POST', '/api/consumers', { token, body: { consumer_id: crypto.randomUUID() } })
    // Until the change is in memory and its log record waits for the fsync.
    await sync.waiting()
    const read = h.request('GET', '/api/consumers', { token })
    // A read by id builds its answer before it waits: the log still counts the problem's bytes.
    h.logged.length = 0
    const readById = h.request('GET', `/api/organizations/${customer}`, { token })
    sync.fail()
    expectProblem(await read, 503, 'storage_unavailable')
    expectProblem(await write, 503, 'storage_unavailable')
    const byId = await readById
    expectProblem(byId, 503, 'storage_unavailable')
    const line = h.logged.map((text) => JSON.parse(text)).find((entry) => entry.msg === 'request' && entry.route === '/api/organizations/:organization_id')
    expect(line).toMatchObject({ status: 503, trace_id: byId.headers.get('x-trace-id'), bytes_out: Buffer.byteLength(JSON.stringify(byId.body)) })
  } finally {
    sync.restore()
  }
  const after = await h.request('GET', '/api/consumers', { token })
  expect(after.body.total).toBe(0)
})

test('a refusal that rested on a write whose fsync then fails is that 503 too, not a 409 for a record that never existed', async () => {
  const [first, second] = [await h.createCustomer('First'), await h.createCustomer('Second')]
  const [firstToken, secondToken] = [h.token(first, 'admin'), h.token(second, 'admin')]
  await h.tokensRecorded()
  const sync = holdNextSync(h)
  const id = crypto.randomUUID()
  try {
    const created = h.request('POST', '/api/consumers', { token: firstToken, body: { consumer_id: id } })
    await sync.waiting()
    // The same id for another customer: refused while the first one's consumer is in memory, and
    // the refusal waits for that consumer's fsync instead of answering.
    const settle = h.storage.settle.bind(h.storage)
    let refusalWaits!: () => void
    const waiting = new Promise<string>((resolve) => (refusalWaits = () => resolve('waiting')))
    h.storage.settle = <T>(value: T) => {
      const settled = settle(value)
      if (value instanceof Response && settled instanceof Promise) refusalWaits()
      return settled
    }
    const taken = h.request('POST', '/api/consumers', { token: secondToken, body: { consumer_id: id } })
    expect(await Promise.race([taken.then((res) => `answered ${res.status}`), waiting])).toBe('waiting')
    sync.fail()
    expectProblem(await created, 503, 'storage_unavailable')
    expectProblem(await taken, 503, 'storage_unavailable')
  } finally {
    sync.restore()
    delete (h.storage as { settle?: unknown }).settle // the prototype's again
  }
  expect((await h.request('GET', `/api/consumers/${id}`)).status).toBe(404)
  // With the log writing again, the same pair is 201 and the 409 it now rests on.
  expect((await h.request('POST', '/api/consumers', { token: firstToken, body: { consumer_id: id } })).status).toBe(201)
  expectProblem(await h.request('POST', '/api/consumers', { token: secondToken, body: { consumer_id: id } }), 409, 'id_owned_by_another_customer')
})

test("a read that waits for a write's fsync answers once it is durable: JSON with its trace id and rate-limit headers, its bytes in the request log", async () => {
  const limited = await createHarness({ rateLimiter: new RateLimiter(1000) })
  try {
    const customer = await limited.createCustomer('Waiter')
    const token = limited.token(customer, 'admin')
    await limited.tokensRecorded()
    // The log's next fsync is held until the reads have seen the write, then made.
    const sync = holdNextSync(limited)
    try {
      const write = limited.request('POST', '/api/consumers', { token, body: { consumer_id: crypto.randomUUID() } })
      await sync.waiting()
      // Answers made from the records' remembered texts (a string), each waiting for the write.
      const byId = limited.request('GET', `/api/organizations/${customer}`, { token })
      const list = limited.request('GET', '/api/consumers', { token })
      // And one answered as an object.
      const tokens = limited.request('GET', '/api/tokens', { token })
      sync.release()
      const [created, organization, consumers, tokenList] = await Promise.all([write, byId, list, tokens])
      expect(created.status).toBe(201)
      expect(consumers.body.total).toBe(1)
      expect(tokenList.body.tokens.length).toBeGreaterThan(0)
      for (const answer of [organization, consumers, tokenList]) {
        expect(answer.status).toBe(200)
        expect(answer.headers.get('content-type')).toBe('application/json;charset=utf-8')
        expect(answer.headers.get('x-trace-id')).toMatch(/^[0-9a-f-]{36}$/)
        expect(answer.headers.get('ratelimit-policy')).toBe('"default";q=2000;w=1')
        expect(answer.headers.get('ratelimit')).toMatch(/^"default";r=\d+;t=\d+$/)
      }
      expect(organization.body.trace_id).toBe(organization.headers.get('x-trace-id'))
      // Their request lines count the bytes sent.
      const lines = limited.logged.map((text) => JSON.parse(text)).filter((entry) => entry.msg === 'request' && entry.method === 'GET')
      for (const [route, answer] of [['/api/organizations/:organization_id', organization], ['/api/consumers', consumers], ['/api/tokens', tokenList]] as const) {
        expect(lines.find((entry) => entry.route === route)).toMatchObject({ status: 200, bytes_out: Buffer.byteLength(JSON.stringify(answer.body)) })
      }
    } finally {
      sync.restore()
    }
  } finally {
    await limited.close()
  }
})

test('a read that gave the loop back while a write it had seen was undone is that 503 too, though nothing is left to wait for', async () => {
  const customer = await h.createCustomer('Walker')
  const token = h.token(customer, 'admin')
  const consumerId = crypto.randomUUID()
  expect((await h.request('POST', '/api/consumers', { token, body: { consumer_id: consumerId } })).status).toBe(201)
  await h.tokensRecorded()
  // Lists read as a long walk does: what it saw now, its answer later (after the write is undone).
  const list = h.storage.list.bind(h.storage)
  let goOn!: () => void
  const walked = new Promise<void>((resolve) => (goOn = resolve))
  h.storage.list = (query) => {
    const page = list(query)
    return walked.then(() => page)
  }
  const sync = holdNextSync(h)
  try {
    const suspend = h.request('PATCH', `/api/consumers/${consumerId}/suspend`, { token })
    await sync.waiting()
    const read = h.request('GET', '/api/consumers?state=suspended', { token })
    sync.fail()
    expectProblem(await suspend, 503, 'storage_unavailable')
    goOn()
    expectProblem(await read, 503, 'storage_unavailable')
  } finally {
    sync.restore()
    delete (h.storage as { list?: unknown }).list // the prototype's again
  }
  expect((await h.request('GET', '/api/consumers?state=suspended', { token })).body.total).toBe(0)
})

test("a change, or a refusal, accepted on its token's organization while that organization's activation was in flight is the 503 once the activation is undone", async () => {
  const customer = await h.createCustomer('Reactivated')
  const token = h.token(customer, 'admin')
  const suspended = crypto.randomUUID()
  expect((await h.request('POST', '/api/consumers', { token, body: { consumer_id: suspended } })).status).toBe(201)
  expect((await h.request('PATCH', `/api/consumers/${suspended}/suspend`, { token })).status).toBe(200)
  await h.tokensRecorded()
  expect((await h.request('PATCH', `/api/organizations/${customer}/suspend`)).status).toBe(200)
  const sync = holdNextSync(h)
  const consumerId = crypto.randomUUID()
  try {
    const activate = h.request('PATCH', `/api/organizations/${customer}/activate`)
    await sync.waiting()
    // The token is checked now, with the customer active in memory; the body comes later, as a slow client's does.
    const sent: ReadableStreamDefaultController<Uint8Array>[] = []
    const slowly = (method: string, path: string) => {
      const body = new ReadableStream<Uint8Array>({ start: (controller) => void sent.push(controller) })
      const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
      return h.app.handle(new Request(`http://localhost${path}`, { method, body, headers, duplex: 'half' } as RequestInit))
    }
    const create = slowly('POST', '/api/consumers')
    // Refused on what they read (409 already_in_state in the change; 404 before it), but their token rests on the activation too.
    const again = slowly('PATCH', `/api/consumers/${suspended}/suspend`)
    const unknown = slowly('PATCH', `/api/consumers/${crypto.randomUUID()}/suspend`)
    sync.fail()
    expectProblem(await activate, 503, 'storage_unavailable')
    sent[0]!.enqueue(new TextEncoder().encode(JSON.stringify({ consumer_id: consumerId })))
    for (const controller of sent.slice(1)) controller.enqueue(new TextEncoder().encode('{}'))
    for (const controller of sent) controller.close()
    for (const answer of await Promise.all([create, again, unknown])) {
      expect([answer.status, ((await answer.json()) as { code: string }).code]).toEqual([503, 'storage_unavailable'])
    }
  } finally {
    sync.restore()
  }
  expect((await h.request('GET', `/api/organizations/${customer}`)).body.organization.state).toBe('suspended')
  expect((await h.request('GET', `/api/consumers/${consumerId}`)).status).toBe(404)
  expect((await h.request('GET', `/api/audit-events?target_ids=${consumerId}`)).body.total).toBe(0)
})

test('a token command of the CLI answers once what it read is durable, and fails (exit 1) if it was undone: no "already revoked", no token listed that was never made', async () => {
  const customer = await h.createCustomer('Commanded')
  const issued = await h.request('POST', '/api/tokens', { body: { organization_id: customer, role: 'viewer' } })
  const tokenId = issued.body.token.token_id
  /** `command` run while `write` waits for an fsync that then fails: both are the 503's. */
  const besideFailedWrite = async (write: () => Promise<ApiResponse>, command: TokenCommand) => {
    const sync = holdNextSync(h)
    try {
      const written = write()
      await sync.waiting()
      const answered = performTokenCommand(h.storage, command)
      sync.fail()
      expectProblem(await written, 503, 'storage_unavailable')
      expect(await answered.catch((error) => error)).toBeInstanceOf(StorageUnavailableError)
    } finally {
      sync.restore()
    }
  }
  await besideFailedWrite(() => h.request('PATCH', `/api/tokens/${tokenId}/revoke`), { command: 'tokens revoke', token_id: tokenId })
  expect((await h.request('GET', `/api/organizations/${customer}`, { token: issued.body.secret })).status).toBe(200)
  const neverMade = { organization_id: customer, role: 'admin', description: 'never made' }
  await besideFailedWrite(() => h.request('POST', '/api/tokens', { body: neverMade }), { command: 'tokens list', organization_id: customer })
  expect(await performTokenCommand(h.storage, { command: 'tokens revoke', token_id: tokenId })).toEqual({ revoked: true })
})
