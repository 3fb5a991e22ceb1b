/**
 * Operating keyward (docs/operations.md; docs/operations.md): GET /readyz, GET /metrics parsed by a
 * Prometheus text-format parser, the request log, and rate limits per token and per client address.
 * On both stores (test/run-suites.ts); the store-specific readiness cases say which store they need.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import parsePrometheusTextFormat, { type ParsedFamily } from 'parse-prometheus-text-format'
import { createHarness, CLIENT_ADDRESS_HEADER, type Harness } from '../support/harness'
import { TEST_STORE } from '../support/database'
import { createConsumer, tenants, UUID_LOWER, type Tenants, expectProblem } from '../support/fixtures'
import { RateLimiter } from '../../src/ops/rate-limit'
import { createApp } from '../../src/app'
import { TokenVerifier } from '../../src/auth/tokens'
import { PostgresStorage } from '../../src/storage/postgres'
import { createLogger } from '../../src/ops/logger'
import { Histogram, Metrics } from '../../src/ops/metrics'
import { DatabaseUnavailableError } from '../../src/storage/postgres/errors'
import type { FileHandle } from 'node:fs/promises'

let h: Harness
let t: Tenants
beforeAll(async () => {
  h = await createHarness()
  t = await tenants(h)
})
afterAll(() => h.close())

describe('GET /readyz', () => {
  test('ready: 200 {"status":"ready"}, without a token; /healthz stays liveness', async () => {
    const ready = await h.request('GET', '/readyz', { token: null })
    expect(ready.status).toBe(200)
    expect(ready.body).toEqual({ status: 'ready' })
    expect(ready.headers.get('x-trace-id')).toMatch(UUID_LOWER)
    expect((await h.request('GET', '/healthz', { token: null })).body).toEqual({ status: 'ok' })
  })

  test.skipIf(TEST_STORE !== 'embedded')('embedded: 503 storage_unavailable after a failed write; ready again once a write succeeds, or once /readyz finds the log takes writes (no write needed)', async () => {
    const broken = await createHarness()
    try {
      const writer = (broken.store as unknown as { writer: { file: FileHandle; currentSegment: { path: string } } }).writer
      const file = writer.file
      const datasync = file.datasync.bind(file)
      // The next `failures` syncs fail (the failed batch's own; the sync of its zeroing after it must
      // succeed, or the server stops: docs/operations.md).
      let failures = 1
      // fdatasync reporting EIO cannot be caused on demand from a test; this stands in for it (as in test/unit/store.test.ts).
      file.datasync = async () => {
        if (failures-- > 0) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })
        return datasync()
      }
      const organizations = () => broken.store!.tables.organizations.size
      const failed = await broken.request('POST', '/api/organizations', { body: { description: 'lost', parent_id: broken.vendorId } })
      expect(failed.body.code).toBe('storage_unavailable')
      failures = 1 // the probe's sync fails too: the disk has not recovered
      const unready = await broken.request('GET', '/readyz', { token: null })
      expect(unready.status).toBe(503)
      expect(unready.body).toMatchObject({ status: 503, code: 'storage_unavailable' })
      expect(unready.body.trace_id).toBe(unready.headers.get('x-trace-id'))
      // The failure was logged with its trace id, as a JSON line.
      const logged = broken.logged.map((line) => JSON.parse(line))
      expect(logged.some((entry) => entry.level === 'error' && entry.msg === 'storage failure' && entry.trace_id === failed.body.trace_id)).toBe(true)

      // The disk recovers and nobody writes (a load balancer took the server out): /readyz's probe
      // of the log finds it takes writes, and the log's records are unchanged by it.
      const records = async () => (await Bun.file(writer.currentSegment.path).bytes()).filter((byte) => byte !== 0).length
      const before = { organizations: organizations(), records: await records() }
      expect(failures).toBe(0)
      expect((await broken.request('GET', '/readyz', { token: null })).status).toBe(200)
      expect({ organizations: organizations(), records: await records() }).toEqual(before)

      // Failing again; this time a client's write comes first, and succeeds: ready too.
      failures = 1
      expect((await broken.request('POST', '/api/organizations', { body: { description: 'lost too', parent_id: broken.vendorId } })).status).toBe(503)
      expect((await broken.request('POST', '/api/organizations', { body: { description: 'kept', parent_id: broken.vendorId } })).status).toBe(201)
      expect((await broken.request('GET', '/readyz', { token: null })).status).toBe(200)
      // Counted by reason; /readyz's own 503 is a probe's answer, not a request the storage failed.
      expect((await scrape(broken)).families.get('keyward_storage_unavailable_total')!.metrics).toEqual([{ value: '2', labels: { reason: 'storage_write_failed' } }])
    } finally {
      await broken.close()
    }
  })

  test('database mode: 503 database_unavailable to every /readyz while the database cannot be reached', async () => {
    // Port 1 on this machine: nothing listens, the connection is refused at once.
    const storage = PostgresStorage.connect('postgres://postgres@127.0.0.1:1/keyward_nowhere', { maxConnections: 1 })
    try {
      const app = createApp({ storage, verifier: new TokenVerifier(), config: { publicUrl: 'http://keyward.test', autoVerifyInstallations: false }, logger: createLogger('json', () => {}) })
      const answers = await Promise.all(Array.from({ length: 20 }, () => app.handle(new Request('http://localhost/readyz'))))
      for (const answer of answers) {
        expect(answer.status).toBe(503)
        expect(((await answer.json()) as { code: string }).code).toBe('database_unavailable')
      }
    } finally {
      await storage.close()
    }
  })
})

/** GET /metrics as `token`: its text, and its families as parsed by parse-prometheus-text-format. */
async function scrape(harness: Harness, token?: string): Promise<{ text: string; families: Map<string, ParsedFamily> }> {
  const res = await harness.request('GET', '/metrics', { token })
  expect(res.status).toBe(200)
  expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8')
  const text = res.body as string
  return { text, families: new Map(parsePrometheusTextFormat(text).map((family) => [family.name, family])) }
}

describe('GET /metrics', () => {
  test('503s counted by why the storage could not serve them (docs/operations.md, "Metrics")', async () => {
    const harness = await createHarness()
    try {
      const found = harness.storage.findCredential
      const failures = [
        new DatabaseUnavailableError(new Error('connection refused')),
        new DatabaseUnavailableError(new Error('connection refused')),
        new DatabaseUnavailableError(new Error('waited'), 'the database did not answer in time'),
        new DatabaseUnavailableError(new Error('pool'), 'no database connection was free in time'),
        new DatabaseUnavailableError(new Error('40001'), 'the database was too busy for this change'),
      ]
      for (const failure of failures) {
        harness.storage.findCredential = () => {
          throw failure
        }
        expectProblem(await harness.request('GET', '/api/organizations'), 503, 'database_unavailable')
      }
      harness.storage.findCredential = found
      const counted = (await scrape(harness)).families.get('keyward_storage_unavailable_total')!
      expect(counted.type).toBe('COUNTER')
      expect(Object.fromEntries(counted.metrics.map((metric) => [metric.labels!.reason, metric.value]))).toEqual({
        database_unreachable: '2',
        database_timeout: '1',
        database_pool_busy: '1',
        database_contention: '1',
      })
    } finally {
      await harness.close()
    }
  })

  test('for a vendor token of any role; 401 without a valid token; 404 for a customer or partner token, as an unknown route', async () => {
    for (const role of ['admin', 'application_admin', 'viewer'] as const) {
      expect((await h.request('GET', '/metrics', { token: h.token(t.V, role) })).status).toBe(200)
    }
    expect((await h.request('GET', '/metrics', { token: null })).status).toBe(401)
    expect((await h.request('GET', '/metrics', { token: 'kw_not_a_token' })).status).toBe(401)
    const unknown = await h.request('GET', '/api/no-such-route')
    for (const org of [t.A, t.AP]) {
      const res = await h.request('GET', '/metrics', { token: h.token(org, 'admin') })
      expect(res.status).toBe(404)
      expect({ ...res.body, trace_id: undefined }).toEqual({ ...unknown.body, trace_id: undefined })
    }
  })

  test('the series of docs/operations.md, by route template, bounded, without identifiers', async () => {
    const consumer = await createConsumer(h, t.A)
    expect((await h.request('GET', `/api/consumers/${consumer.consumer_id}`)).status).toBe(200)
    expect((await h.request('GET', `/api/consumers/${crypto.randomUUID()}`)).status).toBe(404)
    await h.request('GET', `/api/nothing/${crypto.randomUUID()}`)
    const { text, families } = await scrape(h)

    const requests = families.get('keyward_http_requests_total')!
    expect(requests.type).toBe('COUNTER')
    const count = (route: string, method: string, status: string) =>
      Number(requests.metrics.find((m) => m.labels!.route === route && m.labels!.method === method && m.labels!.status === status)?.value ?? 0)
    expect(count('/api/consumers/:consumer_id', 'GET', '200')).toBeGreaterThanOrEqual(1)
    expect(count('/api/consumers/:consumer_id', 'GET', '404')).toBeGreaterThanOrEqual(1)
    expect(count('/api/consumers', 'POST', '201')).toBeGreaterThanOrEqual(1)
    expect(count('unmatched', 'GET', '404')).toBeGreaterThanOrEqual(1)
    // A method that is none of HTTP's is one label value too (Bun's Request turns such a method into GET).
    expect(new Metrics().series('unmatched', 'BREW').method).toBe('other')

    expect(families.get('keyward_http_request_duration_seconds')!.type).toBe('HISTOGRAM')
    // The parser merges the label sets of a histogram into one (it keeps no labels there): read its lines.
    const sample = (line: string) => Number(text.split('\n').find((l) => l.startsWith(`${line} `))?.split(' ')[1])
    const read = 'route="/api/consumers/:consumer_id",method="GET"'
    expect(sample(`keyward_http_request_duration_seconds_count{${read}}`)).toBeGreaterThanOrEqual(2)
    expect(sample(`keyward_http_request_duration_seconds_bucket{${read},le="+Inf"}`)).toBe(sample(`keyward_http_request_duration_seconds_count{${read}}`))
    expect(sample(`keyward_http_request_duration_seconds_sum{${read}}`)).toBeGreaterThan(0)

    const writes = families.get('keyward_storage_write_duration_seconds')!
    expect(writes.type).toBe('HISTOGRAM')
    expect(Number(writes.metrics[0]!.count)).toBeGreaterThanOrEqual(1)

    const records = families.get('keyward_records')!
    expect(records.type).toBe('GAUGE')
    expect(records.metrics.map((m) => m.labels!.table).sort()).toEqual(
      ['applications', 'audit_events', 'consumers', 'enrollments', 'installations', 'keysets', 'organizations', 'tokens'],
    )
    // Exact counts in embedded mode; PostgreSQL's statistics estimate them (and lag).
    if (TEST_STORE === 'embedded') expect(Number(records.metrics.find((m) => m.labels!.table === 'organizations')!.value)).toBe(5)

    const info = families.get('keyward_build_info')!
    expect(info.metrics).toEqual([{ value: '1', labels: { version: (await import('../../src/version')).VERSION } }])

    // No organization or record identifier in any label: only templates, methods, statuses, tables, the version.
    for (const family of families.values()) {
      for (const metric of family.metrics) for (const value of Object.values(metric.labels ?? {})) expect(value).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}/)
    }
  })
})

describe('the request log', () => {
  test('one JSON line per request: template, status, duration, trace id, the token behind it, bytes out; no secret', async () => {
    const harness = await createHarness()
    try {
      const token = harness.token(harness.vendorId, 'viewer')
      await harness.tokensRecorded()
      harness.logged.length = 0
      const consumer = crypto.randomUUID()
      const asked = [
        await harness.request('GET', `/api/organizations/${harness.vendorId}?verbose=secret-query-value`, { token }),
        await harness.request('GET', '/api/organizations', { token: 'kw_wrong_token_value' }),
        await harness.request('GET', '/healthz', { token: null }),
        await harness.request('GET', `/api/unknown/${consumer}`, { token: null }),
        // A trailing slash is an unknown route (exact paths): filed as one, not as the list's 404.
        await harness.request('GET', '/api/organizations/', { token }),
        await harness.request('POST', '/api/consumers', { body: { consumer_id: consumer, organization_id: harness.vendorId, api_key: 'secret-api-key' } }),
        // With a valid token: a problem (its length is its own, not a noted one) and a list.
        await harness.request('GET', `/api/consumers/${crypto.randomUUID()}`, { token }),
        // A query is no part of the route: filed under the list's template.
        await harness.request('GET', '/api/consumers?page=1&page_size=10', { token }),
      ]
      // The harness reads /openapi.json once, to check every answer against it.
      const lines = harness.logged.map((line) => JSON.parse(line)).filter((entry) => entry.msg === 'request' && entry.route !== '/openapi.json')
      expect(lines.length).toBe(asked.length)
      for (const [i, entry] of lines.entries()) {
        expect(entry.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
        expect(entry.level).toBe('info')
        expect(entry.status).toBe(asked[i]!.status)
        expect(entry.trace_id).toBe(asked[i]!.headers.get('x-trace-id'))
        expect(entry.duration_ms).toBeGreaterThanOrEqual(0)
        expect(entry.bytes_out).toBe(Buffer.byteLength(JSON.stringify(asked[i]!.body)))
      }
      expect(lines.map((entry) => [entry.method, entry.route])).toEqual([
        ['GET', '/api/organizations/:organization_id'],
        ['GET', '/api/organizations'],
        ['GET', '/healthz'],
        ['GET', 'unmatched'],
        ['GET', 'unmatched'],
        ['POST', '/api/consumers'],
        ['GET', '/api/consumers/:consumer_id'],
        ['GET', '/api/consumers'],
      ])
      // Answered at once (a read) or later (a write, which reads its body first): the token behind each.
      for (const i of [0, 5, 6, 7]) expect(lines[i]).toMatchObject({ organization_id: harness.vendorId, token_id: expect.stringMatching(UUID_LOWER) })
      expect(lines[1].organization_id).toBeUndefined()
      expect(lines[1].token_id).toBeUndefined()
      const everything = harness.logged.join('')
      for (const secret of [token, harness.vendorToken, 'kw_wrong_token_value', 'secret-query-value', 'secret-api-key', consumer]) expect(everything).not.toContain(secret)
    } finally {
      await harness.close()
    }
  })
})

describe('rate limits', () => {
  /** A harness limited to 2 requests per second (bursts of 4) on a clock the test moves. */
  async function limited() {
    const clock = { now: 0 }
    const harness = await createHarness({ rateLimiter: new RateLimiter(2, 100, () => clock.now) })
    return { harness, clock }
  }

  test('every /api answer, success or problem, carries RateLimit-Policy and RateLimit; past the burst, 429 with Retry-After', async () => {
    const { harness, clock } = await limited()
    try {
      const path = `/api/organizations/${harness.vendorId}`
      const remaining: string[] = []
      for (let i = 0; i < 4; i++) {
        const res = await harness.request('GET', i === 1 ? `/api/organizations/${crypto.randomUUID()}` : path)
        expect(res.status).toBe(i === 1 ? 404 : 200)
        expect(res.headers.get('ratelimit-policy')).toBe('"default";q=4;w=1')
        remaining.push(res.headers.get('ratelimit')!)
      }
      expect(remaining).toEqual(['"default";r=3;t=1', '"default";r=2;t=1', '"default";r=1;t=2', '"default";r=0;t=2'])
      const refused = await harness.request('GET', path)
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ status: 429, code: 'rate_limited' })
      expect(refused.headers.get('retry-after')).toBe('1')
      expect(refused.headers.get('ratelimit')).toBe('"default";r=0;t=2')
      expect(refused.headers.get('ratelimit-policy')).toBe('"default";q=4;w=1')
      // Half a second refills one request.
      clock.now += 500
      expect((await harness.request('GET', path)).status).toBe(200)
      expect((await harness.request('GET', path)).status).toBe(429)
      // A quarter refills half of one: none left, and RateLimit says so (it never rounds up).
      clock.now += 250
      const half = await harness.request('GET', path)
      expect([half.status, half.headers.get('ratelimit')]).toEqual([429, '"default";r=0;t=2'])
      // Routes outside /api are not limited, and carry no such headers.
      const health = await harness.request('GET', '/healthz', { token: null })
      expect(health.status).toBe(200)
      expect(health.headers.get('ratelimit')).toBeNull()
    } finally {
      await harness.close()
    }
  })

  test('a change over the limit is 429 like a read, with Retry-After, and is not made; nor is its body read', async () => {
    const { harness } = await limited()
    try {
      const create = (description: string) => harness.request('POST', '/api/organizations', { body: { description, parent_id: harness.vendorId } })
      for (let i = 0; i < 4; i++) expect((await create(`allowed ${i}`)).status).toBe(201)
      const refused = await create('refused')
      expect([refused.status, refused.body.code, refused.headers.get('retry-after'), refused.headers.get('ratelimit')]).toEqual([429, 'rate_limited', '1', '"default";r=0;t=2'])
      // A body that is not JSON at all: 429 still, since the token's limit is judged before any body is read.
      const unread = await harness.app.handle(
        new Request('http://localhost/api/organizations', { method: 'POST', headers: { authorization: `Bearer ${harness.vendorToken}`, 'content-type': 'application/json' }, body: '{' }),
      )
      expect(unread.status).toBe(429)
      const descriptions = (await harness.request('GET', '/api/organizations', { token: harness.token(harness.vendorId, 'viewer') })).body.organizations.map((o: { description: string }) => o.description)
      expect(descriptions.filter((d: string) => d.startsWith('allowed') || d === 'refused')).toEqual(['allowed 0', 'allowed 1', 'allowed 2', 'allowed 3'])
    } finally {
      await harness.close()
    }
  })

  test('per token: another token of the same organization has its own bucket', async () => {
    const { harness } = await limited()
    try {
      const other = harness.token(harness.vendorId, 'viewer')
      for (let i = 0; i < 4; i++) expect((await harness.request('GET', '/api/organizations')).status).toBe(200)
      expect((await harness.request('GET', '/api/organizations')).status).toBe(429)
      expect((await harness.request('GET', '/api/organizations', { token: other })).status).toBe(200)
    } finally {
      await harness.close()
    }
  })

  test('without a valid token, per client address: 401s until the address is over the limit, then 429; another address is not', async () => {
    const { harness } = await limited()
    try {
      const from = (address: string, token: string | null) => harness.request('GET', '/api/organizations', { token, headers: { [CLIENT_ADDRESS_HEADER]: address } })
      for (let i = 0; i < 4; i++) {
        const res = await from('192.0.2.1', i % 2 === 0 ? null : 'kw_not_a_token')
        expect(res.status).toBe(401)
        expect(res.headers.get('ratelimit')).toBe(`"default";r=${3 - i};t=${Math.ceil((i + 1) / 2)}`)
      }
      const refused = await from('192.0.2.1', null)
      expect(refused.status).toBe(429)
      expect(refused.headers.get('retry-after')).toBe('1')
      expect((await from('192.0.2.2', null)).status).toBe(401)
      // A valid token from the limited address is charged to the token, not the address, on its
      // first use here too (docs/operations.md: each token may make its N requests a second).
      expect((await from('192.0.2.1', harness.vendorToken)).status).toBe(200)
    } finally {
      await harness.close()
    }
  })

  test('a token that cannot be checked (the database is down) is charged to the client address: 503 with the headers, then 429', async () => {
    const { harness } = await limited()
    try {
      harness.storage.findCredential = () => {
        throw new DatabaseUnavailableError(new Error('connection refused'))
      }
      const from = (address: string) => harness.request('GET', '/api/organizations', { headers: { [CLIENT_ADDRESS_HEADER]: address } })
      for (let i = 0; i < 4; i++) {
        const res = await from('192.0.2.8')
        expectProblem(res, 503, 'database_unavailable')
        expect(res.headers.get('ratelimit-policy')).toBe('"default";q=4;w=1')
        expect(res.headers.get('ratelimit')).toBe(`"default";r=${3 - i};t=${Math.ceil((i + 1) / 2)}`)
      }
      const refused = await from('192.0.2.8')
      expectProblem(refused, 429, 'rate_limited')
      expect(refused.headers.get('retry-after')).toBe('1')
    } finally {
      await harness.close()
    }
  })

  test('a path no route answers is charged to the client address: 404 with the headers, then 429', async () => {
    const { harness } = await limited()
    try {
      const from = (address: string) => harness.request('GET', '/api/no-such-route', { token: null, headers: { [CLIENT_ADDRESS_HEADER]: address } })
      for (let i = 0; i < 4; i++) {
        const res = await from('192.0.2.3')
        expect(res.status).toBe(404)
        expect(res.headers.get('ratelimit-policy')).toBe('"default";q=4;w=1')
        expect(res.headers.get('ratelimit')).toBe(`"default";r=${3 - i};t=${Math.ceil((i + 1) / 2)}`)
      }
      const refused = await from('192.0.2.3')
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ status: 429, code: 'rate_limited' })
      expect(refused.headers.get('retry-after')).toBe('1')
      expect((await from('192.0.2.4')).status).toBe(404)
      // Any path no route answers is charged alike: /api itself, another case, outside /api.
      const unmatched = ['/api', '/api?x=1', '/API/consumers', '/no-such-page']
      const statuses = []
      for (const path of unmatched) {
        const res = await harness.request('GET', path, { token: null, headers: { [CLIENT_ADDRESS_HEADER]: '192.0.2.6' } })
        statuses.push(res.status)
        expect(res.headers.get('ratelimit-policy')).toBe('"default";q=4;w=1')
      }
      expect(statuses).toEqual([404, 404, 404, 404])
      expect((await harness.request('GET', '/no-such-page', { token: null, headers: { [CLIENT_ADDRESS_HEADER]: '192.0.2.6' } })).status).toBe(429)
    } finally {
      await harness.close()
    }
  })

  test('without limits (`--rate-limit 0`): no headers, never 429', async () => {
    const res = await h.request('GET', '/api/organizations')
    expect(res.status).toBe(200)
    expect(res.headers.get('ratelimit')).toBeNull()
    expect(res.headers.get('ratelimit-policy')).toBeNull()
  })
})

test("a duration exactly on a bucket's bound counts in that bucket: Prometheus' `le` is less than or equal", () => {
  const histogram = new Histogram()
  histogram.observe(0.001)
  const text = histogram.render('d', '')
  expect(text).toContain('d_bucket{le="0.0005"} 0\n')
  expect(text).toContain('d_bucket{le="0.001"} 1\n')
  expect(text).toContain('d_count 1\n')
})

test('when the rate limiter needs room, full buckets go first: a client that drained its bucket keeps it, however old', () => {
  let now = 0
  const limiter = new RateLimiter(1, 10, () => now)
  limiter.take('drained')
  limiter.take('drained') // the oldest bucket, now empty
  for (let i = 0; i < 9; i++) limiter.take(`busy ${i}`)
  now += 1000 // the others are full again; the drained one holds one request
  limiter.take('newcomer') // the bound is reached: room is made
  expect(limiter.size).toBeLessThanOrEqual(10)
  expect(limiter.take('drained').allowed).toBe(true)
  expect(limiter.take('drained').allowed).toBe(false) // its own bucket, not a fresh one of two
})

test('the rate limiter holds a bounded number of buckets, however many keys rotate through it', () => {
  let now = 0
  const limiter = new RateLimiter(10, 100, () => now)
  for (let i = 0; i < 10_000; i++) {
    limiter.take(`address ${i}`)
    expect(limiter.size).toBeLessThanOrEqual(100)
    now += 0.01
  }
  // A key that keeps its bucket drained is still limited while others rotate through.
  const drained = new RateLimiter(1, 10, () => now)
  drained.take('steady')
  drained.take('steady')
  expect(drained.take('steady').allowed).toBe(false)
  expect(drained.take('other').allowed).toBe(true)
})
