/**
 * The HTTP plumbing every endpoint shares (docs/api.md "Status codes and errors" and docs/api.md "Service"): problem bodies, unknown
 * routes, body limits and types, trace ids, the error precedence, /healthz (/openapi.json: test/http/openapi.test.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, type ApiResponse, type Harness } from '../support/harness'
import { DatabaseUnavailableError } from '../../src/storage/postgres/errors'
import { pathOfTenant, populatedTenant, p256PublicKey, UUID_LOWER } from '../support/fixtures'
import { tokenIdOf } from '../../src/auth/tokens'

let h: Harness
let customer: string
let partner: string
let other: string
beforeAll(async () => {
  h = await createHarness()
  customer = await h.createCustomer('Customer', { default: 'PROD', supported: 'DEV,PROD' })
  partner = await h.createPartner(customer, 'Partner')
  other = await h.createCustomer('Other')
})
afterAll(() => h.close())

const LIMIT = 64 * 1024
const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
}

/** An RFC 9457 body with exactly the contract's members, and nothing of the internals. */
function expectProblem(res: ApiResponse, status: number, code?: string) {
  expect({ status: res.status, code: res.body?.code }).toEqual({ status, code: code ?? res.body?.code })
  expect(res.headers.get('content-type')).toBe('application/problem+json')
  const keys = ['code', 'detail', 'status', 'title', 'trace_id', 'type']
  expect(Object.keys(res.body).sort()).toEqual(res.body.errors ? [...keys, 'errors'].sort() : keys)
  expect(res.body).toMatchObject({ type: 'about:blank', title: REASONS[status], status })
  expect(res.body.code).toMatch(/^[a-z]+(_[a-z]+)*$/)
  expect(typeof res.body.detail).toBe('string')
  expect(res.body.detail.length).toBeGreaterThan(0)
  expect(res.body.trace_id).toMatch(UUID_LOWER)
  expect(res.headers.get('x-trace-id')).toBe(res.body.trace_id)
  const text = JSON.stringify(res.body)
  for (const leak of ['    at ', '.ts:', 'node_modules', 'elysia', 'Elysia', 'kw1.', 'kw2_']) expect(text).not.toContain(leak)
}

/** A raw request through the app: full control over body bytes and headers. */
async function raw(method: string, path: string, init: { body?: RequestInit['body']; headers?: Record<string, string>; token?: string | null; host?: string } = {}) {
  const headers: Record<string, string> = { ...init.headers }
  const token = init.token === undefined ? h.vendorToken : init.token
  if (token !== null) headers.authorization = `Bearer ${token}`
  await h.tokensRecorded()
  const response = await h.app.handle(new Request(`http://${init.host ?? 'localhost'}${path}`, { method, headers, body: init.body }))
  const text = await response.text()
  let body: unknown = text
  try {
    body = text ? JSON.parse(text) : undefined
  } catch {}
  return { status: response.status, headers: response.headers, body } as ApiResponse
}

/** A body streamed in chunks, so no content-length is known in advance. */
function stream(text: string, chunk = 8192): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text)
  let at = 0
  return new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close()
      controller.enqueue(bytes.slice(at, at + chunk))
      at += chunk
    },
  })
}

/** A create body of exactly `size` bytes (the description carries the padding). */
function createBodyOfSize(size: number): string {
  const empty = JSON.stringify({ description: '', parent_id: h.vendorId })
  const text = JSON.stringify({ description: 'd'.repeat(size - empty.length), parent_id: h.vendorId })
  expect(Buffer.byteLength(text)).toBe(size)
  return text
}

async function organizationCount() {
  return (await h.request('GET', '/api/organizations')).body.organizations.length as number
}

describe('problem bodies', () => {
  test('each status has its reason phrase as title, a snake_case code and a trace id', async () => {
    const viewer = h.token(h.vendorId, 'viewer')
    expectProblem(await h.request('POST', '/api/organizations', { body: { parent_id: h.vendorId } }), 400, 'validation_failed')
    expectProblem(await h.request('GET', '/api/organizations', { token: null }), 401, 'unauthorized')
    expectProblem(await h.request('POST', '/api/organizations', { token: viewer, body: { description: 'x' } }), 403, 'forbidden')
    expectProblem(await h.request('GET', `/api/organizations/${crypto.randomUUID()}`), 404, 'not_found')
    expectProblem(await h.request('PATCH', `/api/organizations/${h.vendorId}/suspend`), 409)
    expectProblem(await raw('POST', '/api/organizations', { body: 'x'.repeat(LIMIT + 1), headers: { 'content-type': 'application/json' } }), 413)
    expectProblem(await raw('POST', '/api/organizations', { body: '{}', headers: { 'content-type': 'text/plain' } }), 415)
  })

  test('validation errors list the offending fields as body.<field>', async () => {
    const res = await h.request('POST', '/api/organizations', { body: { description: '', parent_id: 'nope' } })
    expectProblem(res, 400, 'validation_failed')
    expect(Array.isArray(res.body.errors)).toBe(true)
    for (const error of res.body.errors) {
      expect(Object.keys(error).sort()).toEqual(['message', 'path'])
      expect(error.path).toMatch(/^body\.(description|parent_id)$/)
      expect(error.message.length).toBeGreaterThan(0)
    }
    // Other 400s carry no errors list.
    const json = await h.request('POST', '/api/organizations', { body: '{' })
    expectProblem(json, 400)
    expect(json.body.errors).toBeUndefined()
  })

  test('a 400 about one body field names it in errors: a missing organization_id, one not a customer, an environment the record lacks', async () => {
    const app = (await h.request('POST', '/api/applications', { body: { organization_id: customer, description: 'App', allowed_environments: 'DEV' } })).body.application
    const cases: [string, string, unknown, string, string][] = [
      ['/api/consumers', 'consumer', { consumer_id: crypto.randomUUID() }, 'organization_required', 'body.organization_id'],
      ['/api/installations', 'installation', { installation_id: crypto.randomUUID(), description: 'Pixel' }, 'organization_required', 'body.organization_id'],
      ['/api/consumers', 'consumer', { consumer_id: crypto.randomUUID(), organization_id: partner }, 'not_a_customer', 'body.organization_id'],
      ['/api/applications', 'application', { organization_id: partner, description: 'App' }, 'not_a_customer', 'body.organization_id'],
      ['/api/applications', 'application', { organization_id: customer, description: 'App', allowed_environments: 'QA' }, 'unknown_environment', 'body.allowed_environments'],
      [`/api/environments/${app.application_id}`, 'environment', { environment: 'QA' }, 'unknown_environment', 'body.environment'],
      ['/api/enrollments', 'enrollment', { enrollment_id: crypto.randomUUID(), consumer_id: crypto.randomUUID(), installation_id: crypto.randomUUID(), application_id: app.application_id, environment: 'PROD', installation_description: 'Pixel' }, 'unknown_environment', 'body.environment'],
    ]
    for (const [path, what, body, code, field] of cases) {
      const res = await h.request('POST', path, { body })
      expectProblem(res, 400, code)
      expect({ what, errors: res.body.errors.map((e: { path: string }) => e.path) }).toEqual({ what, errors: [field] })
    }
  })

  test('a malformed path identifier is a 400 naming the parameter', async () => {
    const res = await h.request('GET', '/api/organizations/1234')
    expectProblem(res, 400)
    expect(res.body.errors).toEqual([{ path: 'params.organization_id', message: expect.any(String) }])
  })

  test('an unexpected fault is a 500 problem, logged with its trace id, without internals', async () => {
    const broken = await createHarness()
    try {
      broken.storage.transaction = () => Promise.reject(new Error('the store broke'))
      const res = await broken.request('POST', '/api/organizations', { body: { description: 'x', parent_id: broken.vendorId } })
      expect(res.status).toBe(500)
      expect(res.headers.get('content-type')).toBe('application/problem+json')
      expect(res.body).toMatchObject({ type: 'about:blank', title: 'Internal Server Error', status: 500, code: 'internal_error' })
      expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
      expect(JSON.stringify(res.body)).not.toContain('store')
      // Its own line (docs/operations.md "Logs"), not only the request's: with the trace id the body gives, and the fault.
      const logged = broken.logged.map((line) => JSON.parse(line)).find((entry) => entry.msg === 'unexpected error')
      expect(logged).toMatchObject({ level: 'error', trace_id: res.body.trace_id, error: expect.stringContaining('the store broke') })
    } finally {
      await broken.close()
    }
  })
})

test('a database that cannot be reached is a 503 database_unavailable, logged with its trace id', async () => {
  const cut = await createHarness()
  try {
    // Reads too (the process tests restart a real database); a change is the case both stores can stage here.
    cut.storage.transaction = () => Promise.reject(new DatabaseUnavailableError(new Error('connection refused')))
    const res = await cut.request('POST', '/api/organizations', { body: { description: 'x', parent_id: cut.vendorId } })
    expectProblem(res, 503, 'database_unavailable')
    expect(cut.logged.some((line) => line.includes(res.body.trace_id))).toBe(true)
  } finally {
    await cut.close()
  }
})

test('every /api route: a database that cannot be reached is a 503 database_unavailable, a read as much as a change', async () => {
  const cut = await createHarness()
  try {
    const tenant = await populatedTenant(cut, 'Cut off', true)
    const token = tokenIdOf(cut.token(tenant.customer, 'viewer'))!
    await cut.tokensRecorded()
    // Each path parameter filled with a real record of its kind (`pathOfTenant`), and a body the route accepts.
    const bodies: Record<string, unknown> = {
      'POST /api/organizations': { description: 'x', parent_id: cut.vendorId },
      'PATCH /api/organizations/:organization_id': { description: 'x' },
      'PATCH /api/organizations/:organization_id/environments': { environment: 'QA' },
      'DELETE /api/organizations/:organization_id/environments': { environment: 'DEV' },
      'POST /api/applications': { organization_id: tenant.customer, description: 'x' },
      'PATCH /api/applications/:application_id': { description: 'x' },
      'POST /api/environments/:application_id': { environment: 'DEV' },
      'DELETE /api/environments/:application_id': { environment: 'DEV' },
      'POST /api/consumers': { consumer_id: crypto.randomUUID(), organization_id: tenant.customer },
      'POST /api/installations': { installation_id: crypto.randomUUID(), description: 'x', organization_id: tenant.customer },
      'PATCH /api/installations/:installation_id': { description: 'x' },
      'POST /api/enrollments': { enrollment_id: crypto.randomUUID(), consumer_id: crypto.randomUUID(), installation_id: crypto.randomUUID(), application_id: tenant.app, environment: 'PROD', installation_description: 'x' },
      'POST /api/enrollments/:enrollment_id/keysets': { client_enclave_key: p256PublicKey() },
      'POST /api/tokens': { organization_id: tenant.customer, role: 'viewer' },
    }
    // Every read and change fails as a lost database does; the token's own read (findCredential) still answers.
    const unreachable = () => Promise.reject(new DatabaseUnavailableError(new Error('connection refused')))
    for (const method of ['find', 'findMany', 'findWithParent', 'list', 'exists', 'transaction'] as const) (cut.storage as unknown as Record<string, unknown>)[method] = unreachable
    const routes = cut.app.routes.filter((route) => route.path.startsWith('/api/'))
    expect(routes.length).toBe(41)
    const answers: string[] = []
    for (const route of routes) {
      const res = await cut.request(route.method, pathOfTenant(route.path, tenant, token), { body: bodies[`${route.method} ${route.path}`] })
      answers.push(`${route.method} ${route.path}: ${res.status} ${res.body?.code}`)
    }
    expect(answers.filter((answer) => !answer.endsWith(': 503 database_unavailable'))).toEqual([])
  } finally {
    await cut.close()
  }
})

describe('unknown routes: 404 before anything else', () => {
  const routes: [string, string][] = [
    ['GET', '/api/nothing'],
    ['GET', '/api'],
    ['GET', '/nothing'],
    ['GET', '/'],
    ['POST', '/api/organization'],
    ['PATCH', '/api/organizations'],
    ['DELETE', '/api/organizations'],
    ['OPTIONS', '/api/organizations'],
    ['PUT', `/api/organizations/ID`],
    ['DELETE', `/api/organizations/ID`],
    ['POST', `/api/organizations/ID`],
    ['GET', `/api/organizations/ID/suspend`],
    ['POST', `/api/organizations/ID/activate`],
    ['GET', `/api/organizations/ID/unknown`],
    ['PUT', `/api/organizations/ID/environments`],
    ['POST', `/api/organizations/ID/environments`],
    ['GET', `/api/organizations/ID/environments/PROD`],
    ['POST', '/healthz'],
  ]

  test('with a valid token, with none, with a bad one', async () => {
    for (const [method, template] of routes) {
      const route = template.replace('ID', customer)
      for (const token of [undefined, null, 'garbage']) {
        const res = await h.request(method, route, { token })
        expect({ method, route, token, status: res.status }).toEqual({ method, route, token, status: 404 })
        expectProblem(res, 404, 'not_found')
      }
    }
  })

  test('every route with a trailing slash is an unknown route: nothing is created or read through it', async () => {
    const before = await organizationCount()
    const templates = h.app.routes.filter((r) => r.method !== 'OPTIONS' && r.path !== '/')
    expect(templates.length).toBeGreaterThan(40)
    for (const { method, path } of templates) {
      const route = `${path.replace(/:(\w+)/g, customer)}/`
      const res = await h.request(method, route, { body: method === 'GET' || method === 'DELETE' ? undefined : { description: 'slash', parent_id: h.vendorId } })
      expect({ method, route, status: res.status }).toEqual({ method, route, status: 404 })
      expectProblem(res, 404, 'not_found')
    }
    expect(await organizationCount()).toBe(before)
  })

  test('whatever the Host: a short one (`api`, as a proxy may send) does not make /anything/api/... a route', async () => {
    // Elysia's router read the path from the URL's 12th character on: with `http://api`, the first
    // segment was dropped, and a route ran for a path no route has (requests Bun's own router does
    // not match, and every `app.handle` request, go through it).
    const before = await organizationCount()
    for (const host of ['a', 'ab', 'api', 'a:1', 'api:8', 'localhost']) {
      for (const [method, path, body] of [
        ['GET', '/anything/api/organizations'],
        ['HEAD', '/anything/api/organizations'],
        ['GET', `/x/api/organizations/${customer}`],
        ['HEAD', `/x/api/organizations/${customer}`],
        ['POST', '/x/api/organizations', JSON.stringify({ description: 'through a short host', parent_id: h.vendorId })],
      ] as const) {
        const res = await raw(method, path, { host, body, headers: { 'content-type': 'application/json' } })
        expect({ host, method, path, status: res.status }).toEqual({ host, method, path, status: 404 })
        if (method !== 'HEAD') expectProblem(res, 404, 'not_found')
      }
      // ... and the routes answer as with any other Host.
      expect((await raw('GET', `/api/organizations/${customer}?x=/y`, { host })).status).toBe(200)
      expect((await raw('GET', '/healthz', { host })).status).toBe(200)
    }
    expect(await organizationCount()).toBe(before)
  })

  test('even with an oversized body or a wrong content type', async () => {
    for (const [method, template] of routes.filter(([m]) => m !== 'GET')) {
      const route = template.replace('ID', customer)
      const big = await raw(method, route, { token: null, body: 'x'.repeat(LIMIT * 2), headers: { 'content-type': 'text/plain' } })
      expectProblem(big, 404)
      const streamed = await raw(method, route, { token: 'bad', body: stream('y'.repeat(LIMIT * 2)) })
      expectProblem(streamed, 404)
    }
  })
})

describe('request bodies', () => {
  test('413 over 64 KiB, with a content-length', async () => {
    const before = await organizationCount()
    const body = createBodyOfSize(LIMIT + 1)
    const res = await raw('POST', '/api/organizations', {
      body,
      headers: { 'content-type': 'application/json', 'content-length': String(LIMIT + 1) },
    })
    expectProblem(res, 413, 'payload_too_large')
    expect(await organizationCount()).toBe(before)
  })

  test('413 over 64 KiB, streamed without a content-length', async () => {
    const before = await organizationCount()
    const request = new Request('http://localhost/api/organizations', {
      method: 'POST',
      headers: { authorization: `Bearer ${h.vendorToken}`, 'content-type': 'application/json' },
      body: stream(createBodyOfSize(LIMIT + 1), 1000),
    })
    expect(request.headers.get('content-length')).toBeNull()
    const response = await h.app.handle(request)
    expect(response.status).toBe(413)
    expect(response.headers.get('content-type')).toBe('application/problem+json')
    expect(await organizationCount()).toBe(before)
  })

  test('a content-length over the limit is 413 without reading the body', async () => {
    const res = await raw('POST', '/api/organizations', {
      body: stream('{"description":"x"}'),
      headers: { 'content-type': 'application/json', 'content-length': String(10 * 1024 * 1024) },
    })
    expectProblem(res, 413)
    // Just over the limit, declared: 413 even though the bytes sent are few.
    const barely = await raw('POST', '/api/organizations', {
      body: stream(JSON.stringify({ description: 'x', parent_id: h.vendorId })),
      headers: { 'content-type': 'application/json', 'content-length': String(LIMIT + 1) },
    })
    expectProblem(barely, 413)
  })

  test('exactly 64 KiB passes the size check (then the 1024-character description rule answers)', async () => {
    const body = createBodyOfSize(LIMIT)
    const declared = await raw('POST', '/api/organizations', {
      body,
      headers: { 'content-type': 'application/json', 'content-length': String(LIMIT) },
    })
    expectProblem(declared, 400, 'validation_failed')
    expect(declared.body.errors[0].path).toBe('body.description')
    const streamed = await raw('POST', '/api/organizations', { body: stream(body, 4096), headers: { 'content-type': 'application/json' } })
    expectProblem(streamed, 400, 'validation_failed')
  })

  test('a large valid body under the limit is accepted', async () => {
    const padding = 'p'.repeat(60 * 1024)
    const res = await raw('POST', '/api/organizations', {
      body: JSON.stringify({ description: 'Padded', parent_id: h.vendorId, padding }),
      headers: { 'content-type': 'application/json' },
    })
    expect(res.status).toBe(201)
  })

  test('415 for a body that is not application/json, on every method that takes one', async () => {
    const id = customer
    const cases: [string, string, string][] = [
      ['POST', '/api/organizations', JSON.stringify({ description: 'x', parent_id: h.vendorId })],
      ['PATCH', `/api/organizations/${id}`, JSON.stringify({ description: 'x' })],
      ['PATCH', `/api/organizations/${id}/environments`, JSON.stringify({ environment: 'QA' })],
      ['DELETE', `/api/organizations/${id}/environments`, JSON.stringify({ environment: 'DEV' })],
      ['PATCH', `/api/organizations/${partner}/suspend`, '{}'],
    ]
    const before = await organizationCount()
    for (const [method, route, body] of cases) {
      for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', 'application/problem+json', 'json', undefined]) {
        const headers: Record<string, string> = contentType ? { 'content-type': contentType } : {}
        const res = await raw(method, route, { body: new TextEncoder().encode(body), headers })
        expect({ method, route, contentType, status: res.status }).toEqual({ method, route, contentType, status: 415 })
        expectProblem(res, 415, 'unsupported_media_type')
      }
    }
    expect(await organizationCount()).toBe(before)
    const envs = await h.request('GET', `/api/organizations/${id}/environments`)
    expect(envs.body.supported).toBe('DEV,PROD')
    expect((await h.request('GET', `/api/organizations/${partner}`)).body.organization.state).toBe('active')
  })

  test('415 for a body with a Content-Encoding (gzip, br, ...): never read as if it were plain; identity is plain', async () => {
    const body = JSON.stringify({ description: 'coded', parent_id: h.vendorId })
    const before = await organizationCount()
    for (const coding of ['gzip', 'br', 'deflate', 'x-unknown', 'gzip, identity']) {
      const res = await raw('POST', '/api/organizations', { body, headers: { 'content-type': 'application/json', 'content-encoding': coding } })
      expectProblem(res, 415, 'unsupported_media_type')
    }
    expect(await organizationCount()).toBe(before)
    for (const coding of ['Identity', '', 'identity, identity']) {
      const plain = await raw('POST', '/api/organizations', { body, headers: { 'content-type': 'application/json', 'content-encoding': coding } })
      expect({ coding, status: plain.status }).toEqual({ coding, status: 201 })
    }
  })

  test('application/json with parameters or in another case is accepted', async () => {
    for (const contentType of ['application/json; charset=utf-8', 'Application/JSON', 'application/json;charset=UTF-8']) {
      const res = await raw('POST', '/api/organizations', {
        body: JSON.stringify({ description: 'typed', parent_id: h.vendorId }),
        headers: { 'content-type': contentType },
      })
      expect({ contentType, status: res.status }).toEqual({ contentType, status: 201 })
    }
  })

  test('invalid JSON is 400', async () => {
    const before = await organizationCount()
    for (const body of ['{', '{"description": "x",}', "{'description': 'x'}", 'undefined', '{"description": "x"} trailing', 'NaN']) {
      const res = await h.request('POST', '/api/organizations', { body })
      expect({ body, status: res.status }).toEqual({ body, status: 400 })
      expectProblem(res, 400, 'invalid_json')
    }
    expect(await organizationCount()).toBe(before)
  })

  test('invalid UTF-8 is 400', async () => {
    const before = await organizationCount()
    const prefix = new TextEncoder().encode(`{"parent_id":"${h.vendorId}","description":"`)
    for (const bad of [[0xff], [0xc3, 0x28], [0xe2, 0x82], [0xed, 0xa0, 0x80]]) {
      const body = new Uint8Array([...prefix, ...bad, 0x22, 0x7d])
      const res = await raw('POST', '/api/organizations', { body, headers: { 'content-type': 'application/json' } })
      expectProblem(res, 400, 'invalid_json')
      expect(res.body.detail).toContain('UTF-8')
    }
    expect(await organizationCount()).toBe(before)
    // Valid multi-byte UTF-8 goes through.
    const ok = await raw('POST', '/api/organizations', {
      body: new TextEncoder().encode(JSON.stringify({ description: 'Zürich 東京 🚀', parent_id: h.vendorId })),
      headers: { 'content-type': 'application/json' },
    })
    expect(ok.status).toBe(201)
    expect(ok.body.organization.description).toBe('Zürich 東京 🚀')
  })

  test('a body cut short (declared length or chunked) is 400 invalid_json, logged as a request and not as an error', async () => {
    const before = await organizationCount()
    const start = new TextEncoder().encode(`{"parent_id":"${h.vendorId}","description":"`)
    /** The body's first bytes, then the stream fails: what Bun hands over when a client closes mid-body. */
    const cutShort = () => {
      let sent = false
      return new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent) return controller.error(new Error('the client went away'))
          sent = true
          controller.enqueue(start)
        },
      })
    }
    for (const declared of [{ 'content-length': String(start.length + 20) }, {}] as Record<string, string>[]) {
      const errorsLogged = h.logged.filter((line) => JSON.parse(line).level === 'error').length
      const res = await raw('POST', '/api/organizations', { body: cutShort(), headers: { 'content-type': 'application/json', ...declared } })
      expectProblem(res, 400, 'invalid_json')
      expect(res.body.detail).toContain('could not be read')
      expect(h.logged.filter((line) => JSON.parse(line).level === 'error').length).toBe(errorsLogged)
    }
    expect(await organizationCount()).toBe(before)
  })

  test('a missing body where one is required is 400', async () => {
    expectProblem(await h.request('POST', '/api/organizations'), 400, 'body_required')
    expectProblem(await h.request('PATCH', `/api/organizations/${customer}`), 400)
    expectProblem(await raw('DELETE', `/api/organizations/${customer}/environments`, { headers: { 'content-type': 'application/json' } }), 400)
  })

  test('a description of invisible characters only is 400 like a blank one, on every route that takes one', async () => {
    const app = (await h.request('POST', '/api/applications', { body: { organization_id: customer, description: 'App' } })).body.application
    const installationId = crypto.randomUUID()
    const newEnrollment = () => {
      const [enrollment_id, consumer_id, installation_id] = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()]
      return { enrollment_id, consumer_id, installation_id, application_id: app.application_id, environment: 'PROD' }
    }
    expect((await h.request('POST', '/api/installations', { body: { installation_id: installationId, description: 'Phone', organization_id: customer } })).status).toBe(201)
    const routes: [string, string, (description: string) => Record<string, unknown>][] = [
      ['POST', '/api/organizations', (description) => ({ description, parent_id: h.vendorId })],
      ['PATCH', `/api/organizations/${customer}`, (description) => ({ description })],
      ['POST', '/api/applications', (description) => ({ description, organization_id: customer })],
      ['PATCH', `/api/applications/${app.application_id}`, (description) => ({ description })],
      ['POST', '/api/installations', (description) => ({ description, installation_id: crypto.randomUUID(), organization_id: customer })],
      ['PATCH', `/api/installations/${installationId}`, (description) => ({ description })],
      ['POST', '/api/enrollments', (description) => ({ ...newEnrollment(), installation_description: description })],
    ]
    // NUL, zero-width space, a control, bidi isolates, soft hyphen, BOM, Hangul fillers, a lone surrogate, Unicode spaces.
    // And text neither store can keep as it is (U+0000, a lone surrogate) among visible characters.
    const invisible = ['\u0000', '\u200b', '\u0007\u001f', '\u2066\u2069', '\u00ad', '\ufeff', '\u115f\u3164', '\ud800', '\u00a0\u2003\u3000', ' \u200b\t', 'Pixel\u0000', 'Pixel \udc00']
    for (const [method, path, body] of routes) {
      for (const description of invisible) {
        const res = await h.request(method, path, { body: body(description) })
        const field = path === '/api/enrollments' ? 'body.installation_description' : 'body.description'
        expect({ path, description, status: res.status, field: res.body.errors?.[0]?.path }).toEqual({ path, description, status: 400, field })
      }
      // The control: one visible character among them is enough.
      expect({ method, path, status: (await h.request(method, path, { body: body('\u200bx\u200b') })).status }).toEqual({ method, path, status: method === 'POST' ? 201 : 200 })
    }
  })

  test('a description search for text that could never be stored (U+0000, a lone surrogate) is 400', async () => {
    for (const text of ['%00', 'Pixel%00', '%ED%A0%80x']) {
      const res = await h.request('GET', `/api/installations?page=1&installation_description=${text}`)
      if (text === '%ED%A0%80x') expect(res.status).toBe(200) // not UTF-8: decoded as U+FFFD, which is text
      else expectProblem(res, 400, 'validation_failed')
    }
  })

  test('description length is counted in characters, not UTF-16 units', async () => {
    const res = await h.request('POST', '/api/organizations', { body: { description: '🚀'.repeat(1024), parent_id: h.vendorId } })
    expect(res.status).toBe(201)
    const tooLong = await h.request('POST', '/api/organizations', { body: { description: '🚀'.repeat(1025), parent_id: h.vendorId } })
    expectProblem(tooLong, 400)
  })
})

describe('trace ids', () => {
  test('every response carries a new x-trace-id, equal to the body trace_id where there is one', async () => {
    const responses: ApiResponse[] = [
      await h.request('GET', '/api/organizations'),
      await h.request('GET', '/api/organizations'),
      await h.request('GET', `/api/organizations/${customer}`),
      await h.request('GET', `/api/organizations/${customer}/environments`),
      await h.request('PATCH', `/api/organizations/${customer}`, { body: { description: 'Customer' } }),
      await h.request('GET', `/api/organizations/${crypto.randomUUID()}`),
      await h.request('GET', '/api/nope'),
      await h.request('GET', '/api/organizations', { token: null }),
    ]
    const ids = new Set<string>()
    for (const res of responses) {
      const header = res.headers.get('x-trace-id')
      expect(header).toMatch(UUID_LOWER)
      expect(res.body.trace_id).toBe(header)
      ids.add(header!)
    }
    const health = await h.request('GET', '/healthz', { token: null })
    const openapi = await h.request('GET', '/openapi.json', { token: null })
    for (const res of [health, openapi]) {
      expect(res.headers.get('x-trace-id')).toMatch(UUID_LOWER)
      ids.add(res.headers.get('x-trace-id')!)
    }
    expect(ids.size).toBe(responses.length + 2)
  })
})

describe('error precedence (docs/api.md "Status codes and errors"): 401, 413, 415, 400 path, 404, 403, 400 body, 409', () => {
  test('401 beats 413, 415, a malformed id, 404, 403 and an invalid body', async () => {
    const big = 'x'.repeat(LIMIT + 10)
    expectProblem(await raw('POST', '/api/organizations', { token: 'bad', body: big, headers: { 'content-type': 'application/json' } }), 401)
    expectProblem(await raw('POST', '/api/organizations', { token: null, body: stream(big), headers: { 'content-type': 'text/plain' } }), 401)
    expectProblem(await raw('PATCH', '/api/organizations/bad-id', { token: null, body: '{', headers: { 'content-type': 'text/plain' } }), 401)
    expectProblem(await h.request('PATCH', `/api/organizations/${crypto.randomUUID()}`, { token: h.token(h.vendorId, 'viewer', -5), body: { description: '' } }), 401)
  })

  test('413 beats 415, a malformed id, 404, 403 and an invalid body', async () => {
    const big = 'x'.repeat(LIMIT + 10)
    expectProblem(await raw('POST', '/api/organizations', { body: big, headers: { 'content-type': 'text/plain' } }), 413)
    expectProblem(await raw('POST', '/api/organizations', { body: stream(big) }), 413)
    expectProblem(await raw('PATCH', '/api/organizations/bad-id', { body: big, headers: { 'content-type': 'text/plain' } }), 413)
    expectProblem(await raw('PATCH', `/api/organizations/${other}`, { token: h.token(customer), body: big, headers: { 'content-type': 'application/json' } }), 413)
    expectProblem(await raw('POST', '/api/organizations', { token: h.token(partner, 'viewer'), body: big, headers: { 'content-type': 'application/json' } }), 413)
  })

  test('415 beats a malformed id, 404, 403 and an invalid body', async () => {
    const text = { 'content-type': 'text/plain' }
    expectProblem(await raw('PATCH', '/api/organizations/bad-id', { body: '{', headers: text }), 415)
    expectProblem(await raw('PATCH', `/api/organizations/${other}`, { token: h.token(customer), body: '{}', headers: text }), 415)
    expectProblem(await raw('POST', '/api/organizations', { token: h.token(customer, 'viewer'), body: '{', headers: text }), 415)
  })

  test('a malformed path id (400) beats 404 and 403', async () => {
    const viewer = h.token(customer, 'viewer')
    expectProblem(await h.request('PATCH', '/api/organizations/bad-id', { token: viewer, body: { description: 'x' } }), 400, 'invalid_identifier')
    expectProblem(await h.request('PATCH', '/api/organizations/bad-id/suspend', { token: viewer }), 400, 'invalid_identifier')
    expectProblem(await h.request('DELETE', '/api/organizations/bad-id/environments', { token: h.token(partner), body: {} }), 400, 'invalid_identifier')
  })

  test('404 (out of scope or missing) beats 403 and an invalid body', async () => {
    const appAdmin = h.token(customer, 'application_admin')
    const before = (await h.request('GET', `/api/organizations/${other}`)).body.organization
    for (const id of [other, crypto.randomUUID()]) {
      expectProblem(await h.request('PATCH', `/api/organizations/${id}`, { token: appAdmin, body: { description: '' } }), 404)
      expectProblem(await h.request('PATCH', `/api/organizations/${id}`, { token: h.token(customer), body: '{bad' }), 404)
      expectProblem(await h.request('PATCH', `/api/organizations/${id}/suspend`, { token: appAdmin }), 404)
      expectProblem(await h.request('PATCH', `/api/organizations/${id}/environments`, { token: appAdmin, body: {} }), 404)
    }
    expect((await h.request('GET', `/api/organizations/${other}`)).body.organization).toEqual(before)
    // A customer not enabled for environments: 404 before the viewer's 403 and the bad body.
    expectProblem(await h.request('PATCH', `/api/organizations/${other}/environments`, { token: h.token(h.vendorId, 'viewer'), body: {} }), 404)
  })

  test('403 beats an invalid body and 409', async () => {
    const viewer = h.token(customer, 'viewer')
    expectProblem(await h.request('PATCH', `/api/organizations/${customer}`, { token: viewer, body: { description: '' } }), 403)
    expectProblem(await h.request('PATCH', `/api/organizations/${customer}`, { token: viewer, body: '{bad' }), 403)
    expectProblem(await h.request('PATCH', `/api/organizations/${customer}/environments`, { token: viewer, body: {} }), 403)
    expectProblem(await h.request('PATCH', `/api/organizations/${customer}/environments`, { token: viewer, body: { environment: 'DEV' } }), 403)
    expectProblem(await h.request('PATCH', `/api/organizations/${h.vendorId}/suspend`, { token: h.token(h.vendorId, 'application_admin') }), 403)
    expectProblem(await h.request('PATCH', `/api/organizations/${customer}/activate`, { token: h.token(customer) }), 403)
  })

  test('every route that takes no body: 404 (missing or out of scope) and 403 beat a body that is not JSON, and nothing changes', async () => {
    const tenant = await populatedTenant(h, 'Bodiless', false)
    const token = tokenIdOf(h.token(tenant.customer, 'viewer'))!
    await h.tokensRecorded()
    const bodiless = h.app.routes.filter((route) => route.method === 'PATCH' && /\/:[a-z_]+\/(suspend|activate|verify|revoke)$/.test(route.path))
    expect(bodiless.map((route) => route.path.split('/')[2]).sort()).toEqual(['applications', 'applications', 'consumers', 'consumers', 'enrollments', 'enrollments', 'installations', 'installations', 'organizations', 'organizations', 'tokens'])
    const admin = h.token(tenant.customer)
    const viewer = h.token(tenant.customer, 'viewer')
    const stranger = h.token(other)
    for (const route of bodiless) {
      const inScope = pathOfTenant(route.path, tenant, token)
      const record = inScope.replace(/\/[a-z]+$/, '') // the record's own path: read back, unchanged
      const before = (await h.request('GET', record)).body
      const answer = async (path: string, as: string) => (await raw('PATCH', path, { token: as, body: '{', headers: { 'content-type': 'application/json' } })).status
      const missing = route.path.replace(/:[a-z_]+/, crypto.randomUUID())
      expect({ route: route.path, missing: await answer(missing, admin), outOfScope: await answer(inScope, stranger), viewer: await answer(inScope, viewer) }).toEqual({
        route: route.path,
        missing: 404,
        outOfScope: 404,
        viewer: 403,
      })
      expect((await h.request('GET', record)).body).toEqual({ ...before, trace_id: expect.any(String) })
    }
  })

  test('an invalid body (400) beats 409', async () => {
    // Both keys, one of them an existing environment (that alone would be 409).
    expectProblem(await h.request('PATCH', `/api/organizations/${customer}/environments`, { body: { environment: 'DEV', default: 'QA' } }), 400)
    // The default environment as an array (the string alone would be 409).
    expectProblem(await h.request('DELETE', `/api/organizations/${customer}/environments`, { body: { environment: ['PROD'] } }), 400)
    expectProblem(await h.request('DELETE', `/api/organizations/${customer}/environments`, { body: { environment: 'PROD' } }), 409)
  })
})

describe('/healthz', () => {
  test('200 {"status":"ok"} with no token', async () => {
    const res = await h.request('GET', '/healthz', { token: null })
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ status: 'ok' })
    expect(res.headers.get('content-type')).toStartWith('application/json')
  })
})
