/**
 * Operating the real server (docs/operations.md; docs/operations.md): its log on stderr, one JSON
 * object per line (or `--log-format text`), a line for every request and none holding a secret, the
 * lifecycle lines; rate limits over real connections, per client address; `--rate-limit 0`.
 */
import { afterEach, expect, test } from 'bun:test'
import { tempDataDir } from '../support/temp-dirs'
import { api, initLine, killServers, startServer, stopServer } from '../support/server-process'

afterEach(killServers)
const newDataDir = () => tempDataDir('keyward-operations-')

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Entry = Record<string, any>

/** Every line of `stderr` as JSON (a line that is not JSON fails the test). */
const entries = (stderr: string): Entry[] =>
  stderr
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Entry)

test('JSON lines: one per request with its fields, lifecycle lines, and no token, api_key, body or query value anywhere', async () => {
  const data = newDataDir()
  const server = await startServer(data)
  const { organization_id: vendorId, token } = initLine(server)
  const customer = await api(server.url, token, 'POST', '/api/organizations', { description: 'Customer', parent_id: vendorId })
  const app = await api(server.url, token, 'POST', '/api/applications', { organization_id: customer.body.organization.organization_id, description: 'body-description-secret' })
  expect(app.status).toBe(201)
  const apiKey = app.body.application.api_key as string
  const heads: { read?: Response } = {}
  const gets: { read?: Response } = {}
  const statuses = [
    (await fetch(`${server.url}/api/organizations/${vendorId}?include=query-value-secret`, { headers: { authorization: `Bearer ${token}` } })).status,
    (await fetch(`${server.url}/api/organizations`, { headers: { authorization: 'Bearer kw_not_a_real_token_secret' } })).status,
    (await fetch(`${server.url}/healthz`)).status,
    (await fetch(`${server.url}/readyz`)).status,
    (await fetch(`${server.url}/no/such/route?q=query-value-secret`)).status,
    // Bun's router answers a HEAD with the GET route's handler: the HEAD is counted as a HEAD of that
    // route, and the GETs after it stay GETs of it.
    (await fetch(`${server.url}/healthz`, { method: 'HEAD' })).status,
    (await fetch(`${server.url}/healthz`)).status,
    (heads.read = await fetch(`${server.url}/api/organizations/${vendorId}`, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } })).status,
    (gets.read = await fetch(`${server.url}/api/organizations/${vendorId}`, { headers: { authorization: `Bearer ${token}` } })).status,
    // The documents carry their length, which the log takes without reading them.
    (await fetch(`${server.url}/docs/scalar.js`, { method: 'HEAD' })).status,
  ]
  expect(statuses).toEqual([200, 401, 200, 200, 404, 200, 200, 200, 200, 200])
  // A HEAD of a JSON read names the length its GET sends (keyward leaves Content-Length to Bun there: src/http/foundation.ts).
  const body = await gets.read!.text()
  expect(await heads.read!.text()).toBe('')
  expect(heads.read!.headers.get('content-length')).toBe(String(Buffer.byteLength(body)))
  expect(gets.read!.headers.get('content-length')).toBe(String(Buffer.byteLength(body)))
  const metrics = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${token}` } }).then((res) => res.text())
  expect(metrics).toContain('keyward_http_requests_total{route="/healthz",method="GET",status="200"} 2')
  expect(metrics).toContain('keyward_http_requests_total{route="/healthz",method="HEAD",status="200"} 1')
  expect(metrics).toContain('keyward_http_requests_total{route="/api/organizations/:organization_id",method="GET",status="200"} 2')
  expect(metrics).not.toContain('route="unmatched",method="HEAD"')
  expect(await stopServer(server, 'SIGTERM')).toBe(0)

  const log = entries(server.stderr.text)
  for (const entry of log) {
    expect(entry.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
    expect(['info', 'warn', 'error']).toContain(entry.level)
    expect(typeof entry.msg).toBe('string')
  }
  const requests = log.filter((entry) => entry.msg === 'request')
  expect(requests.map((entry) => [entry.method, entry.route, entry.status])).toEqual([
    ['POST', '/api/organizations', 201],
    ['POST', '/api/applications', 201],
    ['GET', '/api/organizations/:organization_id', 200],
    ['GET', '/api/organizations', 401],
    ['GET', '/healthz', 200],
    ['GET', '/readyz', 200],
    ['GET', 'unmatched', 404],
    ['HEAD', '/healthz', 200],
    ['GET', '/healthz', 200],
    ['HEAD', '/api/organizations/:organization_id', 200],
    ['GET', '/api/organizations/:organization_id', 200],
    ['HEAD', '/docs/scalar.js', 200],
    ['GET', '/metrics', 200],
  ])
  for (const entry of requests) {
    expect(entry.duration_ms).toBeGreaterThanOrEqual(0)
    expect(entry.trace_id).toMatch(/^[0-9a-f-]{36}$/)
    // A HEAD sends no body.
    if (entry.method === 'HEAD') expect(entry.bytes_out).toBe(0)
    else expect(entry.bytes_out).toBeGreaterThan(0)
  }
  expect(requests[2]).toMatchObject({ organization_id: vendorId, token_id: expect.stringMatching(/^[0-9a-f-]{36}$/) })
  expect(requests[3]!.token_id).toBeUndefined()

  // Lifecycle: recovery, the first-run line (its token on stdout only), the start line, the stop.
  const messages = log.map((entry) => entry.msg)
  expect(messages).toContain('recovered')
  const listening = log.find((entry) => entry.msg === 'listening')!
  expect(listening).toMatchObject({ address: server.url, data_dir: data, data_format: expect.any(Number), version: expect.any(String), rate_limit: 0 })
  expect(listening.records.organizations).toBe(1)
  expect(messages.some((msg) => msg.startsWith('SIGTERM: '))).toBe(true)
  expect(log.some((entry) => entry.msg === 'snapshot written' && entry.duration_ms >= 0)).toBe(true)
  expect(messages.at(-1)).toBe('stopped')
  expect(server.stdout.text.trim().split('\n')).toHaveLength(1)

  for (const secret of [token, apiKey, 'kw_not_a_real_token_secret', 'body-description-secret', 'query-value-secret']) {
    expect(server.stderr.text).not.toContain(secret)
  }
})

/**
 * Serves `requests` reads with stderr sent through `reader` (a shell command reading the server's
 * stderr on its stdin, writing what it passes on to the test's pipe), then stops with SIGTERM:
 * every read answered, and the stop's exit code returned.
 */
async function servedWithLogReader(reader: string, requests: number): Promise<{ code: number; stderr: string }> {
  const wrap = (command: string[]) => ['bash', '-c', `exec 2> >(${reader}); exec "$@"`, 'bash', ...command]
  const server = await startServer(newDataDir(), { wrap })
  const { token } = initLine(server)
  for (let i = 0; i < requests; i++) expect((await api(server.url, token, 'GET', '/api/organizations')).status).toBe(200)
  return { code: await stopServer(server, 'SIGTERM'), stderr: server.stderr.text }
}

test('a log nobody reads any more (its pipe closed: EPIPE) costs lines, never the server: it serves on, and SIGTERM still exits 0', async () => {
  // `dd` passes on the first 2,000 bytes (the listening line among them) and exits: every write
  // after that fails. Bun's writer for stderr raised such a failure as an uncaught error, and the
  // process exited 1 at its end.
  const { code, stderr } = await servedWithLogReader('dd bs=1 count=2000 status=none >&2', 200)
  expect(code).toBe(0)
  expect(stderr.length).toBeLessThanOrEqual(2000)
})

test('a log reader that stops reading (a stuck pipe, a terminal after Ctrl-S) holds neither the requests nor the stop: exit 0', async () => {
  // `dd` passes on the first 1,500 bytes, then `sleep` holds the pipe open without reading: once
  // its buffer is full, every write waits. The stop waited for it for ever.
  expect((await servedWithLogReader('dd bs=1 count=1500 status=none >&2; exec sleep 60 >/dev/null 2>&1', 1000)).code).toBe(0)
})

test('--log-format text (and KEYWARD_LOG_FORMAT): the same fields as readable lines', async () => {
  for (const options of [{ wrap: (command: string[]) => [...command, '--log-format', 'text'] }, { env: { KEYWARD_LOG_FORMAT: 'text' } }]) {
    const server = await startServer(newDataDir(), options)
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    const lines = server.stderr.text.trim().split('\n')
    for (const line of lines) expect(line).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z (INFO |WARN |ERROR) \S/)
    const request = lines.find((line) => / request /.test(line))!
    expect(request).toMatch(/ method=GET route=\/healthz status=200 duration_ms=[\d.]+ trace_id=[0-9a-f-]{36} bytes_out=\d+$/)
    expect(lines.at(-1)).toMatch(/ stopped$/)
  }
})

test('--log-format and --rate-limit are checked: anything else is bad usage (exit 2)', async () => {
  const { run, keywardCommand } = await import('../support/server-process')
  for (const [flag, value] of [['--log-format', 'xml'], ['--rate-limit', '-1'], ['--rate-limit', 'many']]) {
    const result = await run(keywardCommand(['serve', '--data', newDataDir(), '--port', '0', `${flag}=${value}`]))
    expect(result.code).toBe(2)
    expect(result.stderr).toContain(`invalid ${flag} '${value}'`)
  }
})

test('the rate limit: 100 a second, bursts of 200, by default; KEYWARD_RATE_LIMIT sets it', async () => {
  // An empty variable is no setting: the default.
  for (const [variable, perSecond] of [['', 100], ['7', 7]] as const) {
    const server = await startServer(newDataDir(), { env: { KEYWARD_RATE_LIMIT: variable } })
    const { token } = initLine(server)
    const res = await fetch(`${server.url}/api/organizations`, { headers: { authorization: `Bearer ${token}` } })
    expect(res.headers.get('ratelimit-policy')).toBe(`"default";q=${2 * perSecond};w=1`)
    expect(res.headers.get('ratelimit')).toBe(`"default";r=${2 * perSecond - 1};t=1`) // a second at most until full again
    expect(server.stderr.text).toContain(`"rate_limit":${perSecond}`)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  }
})

test('rate limits over real connections: per token, and per client address without a valid token; 0 is off', async () => {
  const limited = await startServer(newDataDir(), { rateLimit: 2 })
  const { token } = initLine(limited)
  const get = (authorization?: string) => fetch(`${limited.url}/api/organizations`, { headers: authorization ? { authorization } : {} })
  // The burst is 4: some fifth request in a quick row is refused (a request may refill a fraction).
  const byToken = await Promise.all(Array.from({ length: 8 }, () => get(`Bearer ${token}`)))
  expect(byToken.filter((res) => res.status === 429).length).toBeGreaterThan(0)
  const refused = byToken.find((res) => res.status === 429)!
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
  expect(refused.headers.get('ratelimit-policy')).toBe('"default";q=4;w=1')
  const anonymous = await Promise.all(Array.from({ length: 8 }, () => get()))
  expect(anonymous.map((res) => res.status).filter((status) => status === 429).length).toBeGreaterThan(0)
  expect(anonymous.every((res) => res.status === 401 || res.status === 429)).toBe(true)
  // The documents are charged to the address too; the probes never are.
  const documents = await Promise.all(['/openapi.json', '/docs', '/docs/scalar.js'].flatMap((path) => Array.from({ length: 4 }, () => fetch(`${limited.url}${path}`, { method: 'HEAD' }))))
  expect(documents.filter((res) => res.status === 429).length).toBeGreaterThan(documents.length / 2) // the burst is 4 (a request may refill a fraction)
  expect(documents.every((res) => res.status === 200 || res.status === 429)).toBe(true)
  const probes = await Promise.all(Array.from({ length: 20 }, (_, i) => fetch(`${limited.url}${i % 2 ? '/healthz' : '/readyz'}`)))
  expect(probes.map((res) => res.status)).toEqual(Array(20).fill(200))
  expect(await stopServer(limited, 'SIGTERM')).toBe(0)

  const unlimited = await startServer(newDataDir(), { rateLimit: 0 })
  const { token: other } = initLine(unlimited)
  const all = await Promise.all(Array.from({ length: 40 }, () => fetch(`${unlimited.url}/api/organizations`, { headers: { authorization: `Bearer ${other}` } })))
  expect(all.every((res) => res.status === 200 && res.headers.get('ratelimit') === null)).toBe(true)
  expect(await stopServer(unlimited, 'SIGTERM')).toBe(0)
})
