/**
 * CORS (docs/api.md, "CORS"): off by default; with configured origins, a preflight from one of them is
 * answered 204 with the methods and headers the API takes, and every answer to it (errors included)
 * carries Access-Control-Allow-Origin; other origins get no CORS headers.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, CLIENT_ADDRESS_HEADER, type Harness } from '../support/harness'
import { RateLimiter } from '../../src/ops/rate-limit'

const CONSOLE = 'https://console.example.com'

/** A preflight is the CORS protocol, not an API operation: sent past the harness's document check. */
const preflight = (h: Harness, origin: string, path = '/api/organizations', address = 'test-client') =>
  h.app.handle(
    new Request(`http://localhost${path}`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type', [CLIENT_ADDRESS_HEADER]: address },
    }),
  )

describe('with --cors-origin', () => {
  let h: Harness
  beforeAll(async () => (h = await createHarness({ corsOrigins: [CONSOLE, 'http://localhost:5173'] })))
  afterAll(() => h.close())

  test('a preflight from a configured origin: 204 with the methods, headers and max age', async () => {
    const res = await preflight(h, CONSOLE, `/api/organizations/${crypto.randomUUID()}`)
    expect(res.status).toBe(204)
    expect(res.headers.get('access-control-allow-origin')).toBe(CONSOLE)
    expect(res.headers.get('access-control-allow-methods')).toBe('GET, POST, PATCH, DELETE')
    expect(res.headers.get('access-control-allow-headers')).toBe('authorization, content-type')
    expect(res.headers.get('access-control-max-age')).toBe('600')
    expect(res.headers.get('vary')).toBe('Origin')
    expect(res.headers.get('x-trace-id')).toMatch(/^[0-9a-f-]{36}$/)
    expect(await res.text()).toBe('')
  })

  test('answers to a configured origin carry Allow-Origin and the readable headers, errors included', async () => {
    for (const origin of [CONSOLE, 'http://localhost:5173']) {
      const ok = await h.request('GET', '/api/organizations', { headers: { origin } })
      expect(ok.status).toBe(200)
      expect(ok.headers.get('access-control-allow-origin')).toBe(origin)
      expect(ok.headers.get('access-control-expose-headers')).toBe('x-trace-id, www-authenticate, retry-after, ratelimit, ratelimit-policy')
      const unauthorized = await h.request('GET', '/api/organizations', { token: null, headers: { origin } })
      expect(unauthorized.status).toBe(401)
      expect(unauthorized.headers.get('access-control-allow-origin')).toBe(origin)
      const created = await h.request('POST', '/api/organizations', { body: { description: 'From a browser', parent_id: h.vendorId }, headers: { origin } })
      expect(created.status).toBe(201)
      expect(created.headers.get('access-control-allow-origin')).toBe(origin)
    }
  })

  test('another origin, or none: no CORS headers, and a preflight is an unknown route (404)', async () => {
    for (const headers of [{ origin: 'https://evil.example.com' }, { origin: `${CONSOLE}:8443` }, {} as Record<string, string>]) {
      const res = await h.request('GET', '/api/organizations', { headers })
      expect(res.status).toBe(200)
      expect(res.headers.get('access-control-allow-origin')).toBeNull()
      expect(res.headers.get('vary')).toBe('Origin')
    }
    const res = await preflight(h, 'https://evil.example.com')
    expect(res.status).toBe(404)
    expect(res.headers.get('access-control-allow-origin')).toBeNull()
  })

  test('an OPTIONS request that is not a preflight is an unknown route (404)', async () => {
    const res = await h.app.handle(new Request('http://localhost/api/organizations', { method: 'OPTIONS', headers: { origin: CONSOLE } }))
    expect(res.status).toBe(404)
  })
})

describe('with --cors-origin and rate limits', () => {
  let h: Harness
  // 2 requests a second (bursts of 4), on a clock that does not move.
  beforeAll(async () => (h = await createHarness({ corsOrigins: [CONSOLE], rateLimiter: new RateLimiter(2, 100, () => 0) })))
  afterAll(() => h.close())

  test('a preflight is charged to its client address like a request without a token: the headers, then 429', async () => {
    for (let i = 0; i < 4; i++) {
      const res = await preflight(h, CONSOLE, '/api/organizations', '192.0.2.9')
      expect(res.status).toBe(204)
      expect(res.headers.get('ratelimit-policy')).toBe('"default";q=4;w=1')
      expect(res.headers.get('ratelimit')).toBe(`"default";r=${3 - i};t=${Math.ceil((i + 1) / 2)}`)
      expect(res.headers.get('access-control-allow-origin')).toBe(CONSOLE)
      expect(res.headers.get('vary')).toBe('Origin')
    }
    const refused = await preflight(h, CONSOLE, '/api/organizations', '192.0.2.9')
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('1')
    expect(refused.headers.get('access-control-allow-origin')).toBe(CONSOLE)
    expect(((await refused.json()) as { code: string }).code).toBe('rate_limited')
    // The same address's requests without a token share the bucket; another address has its own.
    expect((await h.request('GET', '/api/organizations', { token: null, headers: { [CLIENT_ADDRESS_HEADER]: '192.0.2.9' } })).status).toBe(429)
    expect((await preflight(h, CONSOLE, '/api/organizations', '192.0.2.10')).status).toBe(204)
  })
})

describe('without it (the default)', () => {
  let h: Harness
  beforeAll(async () => (h = await createHarness()))
  afterAll(() => h.close())

  test('no CORS headers for any origin, and no preflight', async () => {
    const res = await h.request('GET', '/api/organizations', { headers: { origin: CONSOLE } })
    expect(res.status).toBe(200)
    expect(res.headers.get('access-control-allow-origin')).toBeNull()
    expect(res.headers.get('vary')).toBeNull()
    expect((await preflight(h, CONSOLE)).status).toBe(404)
  })
})
