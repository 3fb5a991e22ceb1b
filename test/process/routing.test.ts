/**
 * The real server routes through Bun's native router (Elysia's `listen`), not only `app.handle`:
 * requests as a client sends them on the wire, including a Host header too short for Elysia's own
 * path parsing (which assumes at least `http://x.yz`), reach the right route or a 404 problem body,
 * also where Elysia's router finds the route (a path Bun's router does not match).
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { connect } from 'node:net'
import { tempDir } from '../support/temp-dirs'
import { initLine, killServers, startServer, stopServer, waitFor, type ServerProcess } from '../support/server-process'

let server: ServerProcess
let token: string
let vendor: string

beforeAll(async () => {
  server = await startServer(`${tempDir('keyward-routing-')}/data`)
  ;({ organization_id: vendor, token } = initLine(server))
})
afterAll(async () => {
  await stopServer(server, 'SIGTERM')
  await killServers()
})

/** One raw HTTP/1.1 exchange, so the Host header is exactly what we say (null: none, in HTTP/1.0). */
function rawGet(path: string, host: string | null, authorization?: string, method = 'GET', moreHeaders = '', body = ''): Promise<{ status: number; headers: string; body: string }> {
  const { port } = new URL(server.url)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1')
    let text = ''
    socket.on('data', (chunk) => (text += chunk.toString()))
    socket.on('error', reject)
    socket.on('end', () => {
      const [head = '', body = ''] = text.split('\r\n\r\n')
      resolve({ status: Number(head.split(' ')[1]), headers: head.toLowerCase(), body })
    })
    const auth = authorization ? `Authorization: ${authorization}\r\n` : ''
    const start = host === null ? `${method} ${path} HTTP/1.0\r\n` : `${method} ${path} HTTP/1.1\r\nHost: ${host}\r\n`
    socket.write(`${start}${auth}${moreHeaders}Connection: close\r\n\r\n${body}`)
  })
}

// The last three make `request.url` no URL at all (`new URL` refuses it): the routes read only its path and query.
for (const host of ['a', 'api', 'keyward.internal:8080', '', null, 'a b', 'a:99999', '[::1']) {
  test(`Host: ${host ?? '(none, HTTP/1.0)'} reaches the routes`, async () => {
    const health = await rawGet('/healthz', host)
    expect(health.status).toBe(200)
    expect(health.headers).toContain('x-trace-id:')
    const org = await rawGet(`/api/organizations/${vendor}?unused=1`, host, `Bearer ${token}`)
    expect(org.status).toBe(200)
    expect(JSON.parse(org.body).organization.organization_id).toBe(vendor)
    // A list reads its query from the URL's text: it was a 500 without a Host or with a malformed one.
    const page = await rawGet('/api/consumers?page=2&page_size=5&order=desc', host, `Bearer ${token}`)
    expect([page.status, JSON.parse(page.body)]).toMatchObject([200, { consumers: [], page: 2, page_size: 5 }])
    const malformed = await rawGet('/api/consumers?page=0', host, `Bearer ${token}`)
    expect([malformed.status, JSON.parse(malformed.body).code]).toEqual([400, 'validation_failed'])
    const missing = await rawGet('/api/nowhere', host)
    expect(missing.status).toBe(404)
    expect(JSON.parse(missing.body).code).toBe('not_found')
    // A path no route has goes through Elysia's router, which once dropped its first segment for a short Host.
    for (const path of ['/anything/api/organizations', `/x/api/organizations/${vendor}`, '/abcdefghijklmn/api/organizations']) {
      const through = await rawGet(path, host, `Bearer ${token}`)
      expect({ path, status: through.status }).toEqual({ path, status: 404 })
      expect(JSON.parse(through.body).code).toBe('not_found')
      expect((await rawGet(path, host, `Bearer ${token}`, 'HEAD')).status).toBe(404)
    }
    const body = JSON.stringify({ description: 'through a path no route has', parent_id: vendor })
    const post = await rawGet(`/x/api/organizations`, host, `Bearer ${token}`, 'POST', `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n`, body)
    expect(post.status).toBe(404)
  })
}

test('the URL is bounded by Bun: request line and headers over 16 KiB are 431 before keyward sees them (docs/security.md)', async () => {
  const query = (length: number) => `/api/organizations/${vendor}?${'x'.repeat(length)}`
  expect((await rawGet(query(15_000), 'a', `Bearer ${token}`)).status).toBe(200)
  expect((await rawGet(query(16_500), 'a', `Bearer ${token}`)).status).toBe(431)
})

test("a declared body of any length up to 2^53 - 1 is keyward's own answer: 413 problem after the 401 and the 404 (Bun's own limit is past it)", async () => {
  // Bun's limit was 16 MiB: a longer declared body got a bare 413, before the token and the route.
  for (const length of [64 * 1024 + 1, 16 * 1024 * 1024 + 1, 2 ** 40, Number.MAX_SAFE_INTEGER]) {
    const declared = `Content-Type: application/json\r\nContent-Length: ${length}\r\n`
    const cases = [
      ['/api/consumers', `Bearer ${token}`, 413, 'payload_too_large'],
      ['/api/consumers', undefined, 401, 'unauthorized'],
      ['/api/nowhere', `Bearer ${token}`, 404, 'not_found'],
    ] as const
    for (const [path, authorization, status, code] of cases) {
      const res = await rawGet(path, 'localhost', authorization, 'POST', declared)
      expect({ length, path, status: res.status }).toEqual({ length, path, status })
      expect(res.headers).toContain('content-type: application/problem+json')
      expect(res.headers).toContain('x-trace-id:')
      expect(JSON.parse(res.body).code).toBe(code)
    }
  }
})

test('a HEAD answer carries a Date header, as a GET answer does (Bun gives it to all but HEAD; RFC 9110 section 6.6.1)', async () => {
  for (const [path, authorization] of [['/healthz'], [`/api/organizations/${vendor}`, `Bearer ${token}`], [`/api/organizations/${vendor}`], ['/nowhere']] as const) {
    for (const method of ['GET', 'HEAD']) {
      const res = await rawGet(path, 'localhost', authorization, method)
      expect({ path, method, dates: res.headers.split('\r\n').filter((line) => line.startsWith('date: ')).length }).toEqual({ path, method, dates: 1 })
    }
  }
})

test('dot segments are resolved before matching, also percent-encoded, and the scope applies to the resolved path (docs/api.md "Conventions")', async () => {
  for (const path of ['/api/consumers/../organizations', '/api/consumers/%2e%2e/organizations', '/api/consumers/x/%2E%2E/%2e%2e/organizations', '/api/./organizations']) {
    const res = await rawGet(path, 'localhost', `Bearer ${token}`)
    expect({ path, status: res.status }).toEqual({ path, status: 200 })
    expect(JSON.parse(res.body).organizations.map((o: { organization_id: string }) => o.organization_id)).toContain(vendor)
    // Resolved, it is the list's route: no token, the list's 401, not a 404.
    expect(JSON.parse((await rawGet(path, 'localhost')).body).code).toBe('unauthorized')
  }
})

test('a dot segment where a route takes an id is that id (400), and its request is logged under that route, not the one its resolved path names', async () => {
  const sent = [
    ['PATCH', '/api/installations/./verify', undefined, 401, '/api/installations/:installation_id/verify'],
    ['GET', `/api/organizations/%2e/environments`, `Bearer ${token}`, 400, '/api/organizations/:organization_id/environments'],
    // The vendor has no environments of its own: the route's 404.
    ['GET', `/api/organizations/${vendor}/environments`, `Bearer ${token}`, 404, '/api/organizations/:organization_id/environments'],
    ['GET', `/api/organizations/${vendor}`, `Bearer ${token}`, 200, '/api/organizations/:organization_id'],
  ] as const
  const traceIds: string[] = []
  for (const [method, path, authorization, status] of sent) {
    const res = await rawGet(path, 'localhost', authorization, method)
    expect({ path, status: res.status }).toEqual({ path, status })
    traceIds.push(/x-trace-id: (\S+)/.exec(res.headers)![1]!)
  }
  const lineOf = (traceId: string) => server.stderr.text.split('\n').find((line) => line.includes(`"trace_id":"${traceId}"`))
  await waitFor('the request lines', () => traceIds.every((id) => lineOf(id) !== undefined), server.proc)
  expect(traceIds.map((id) => JSON.parse(lineOf(id)!).route)).toEqual(sent.map((request) => request[4]))
})

test('a chunked body announced with trailers is refused (400 trailers_not_supported) before it is read: Bun refuses the trailers only after, and the change was made unanswered (docs/api.md)', async () => {
  const body = JSON.stringify({ description: 'sent with a trailer', parent_id: vendor })
  const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\nX-Checksum: abc\r\n\r\n`
  const headers = 'Content-Type: application/json\r\nTrailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n'
  const answer = await rawGet('/api/organizations', 'localhost', `Bearer ${token}`, 'POST', headers, chunked)
  expect(answer.status).toBe(400)
  expect(answer.body).toContain('"code":"trailers_not_supported"')
  const listed = await fetch(`${server.url}/api/organizations`, { headers: { authorization: `Bearer ${token}` } })
  expect(await listed.text()).not.toContain('sent with a trailer')
})
