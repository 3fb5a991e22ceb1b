/**
 * GET /openapi.json as a client generator meets it (docs/api.md, "The OpenAPI document, the page and clients"), and the
 * check that test/support/harness.ts runs on every answer of the HTTP tests: it must fail where the
 * document and an answer disagree.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHarness, type Harness } from '../support/harness'
import Ajv2020 from 'ajv/dist/2020'
import addFormats from 'ajv-formats'
import { answerChecker } from '../support/openapi-check'
import { MAX_ENVIRONMENTS, MAX_FILTER_VALUES_SENT } from '../../src/modules/shared/model'
import { AUDIT_ACTIONS } from '../../src/modules/shared/audit'
import { PROBLEM_CODES } from '../../src/modules/shared/errors'
import { readFileSync } from 'node:fs'

let h: Harness
// eslint-disable-next-line @typescript-eslint/no-explicit-any
let document: any
let documentText: string
beforeAll(async () => {
  h = await createHarness()
  const res = await h.request('GET', '/openapi.json', { token: null })
  document = res.body
  documentText = JSON.stringify(document)
})
afterAll(() => h.close())

const operations = () =>
  Object.entries(document.paths).flatMap(([path, methods]) =>
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    Object.entries(methods as Record<string, any>).map(([method, operation]) => ({ path, method, operation })),
  )

describe('the document', () => {
  test('every route of the app is an operation with a unique operationId', () => {
    const ids = operations().map((o) => o.operation.operationId)
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true)
    expect(new Set(ids).size).toBe(ids.length)
    const routes = h.app.routes.map((r) => `${r.method.toLowerCase()} ${r.path.replace(/:([a-z_]+)/g, '{$1}')}`).sort()
    expect(operations().map((o) => `${o.method} ${o.path}`).sort()).toEqual(routes)
  })

  test('an OpenAPI 3 document, served as JSON to a caller with no token, with the bearer scheme and the problem schema', async () => {
    const res = await h.request('GET', '/openapi.json', { token: null })
    expect([res.status, res.headers.get('content-type')]).toEqual([200, expect.stringMatching(/^application\/json/)])
    expect(document.openapi).toMatch(/^3\./)
    expect([typeof document.info.title, typeof document.info.version]).toEqual(['string', 'string'])
    expect(document.components.securitySchemes.bearer).toMatchObject({ type: 'http', scheme: 'bearer' })
    expect(document.components.schemas.Problem.required).toEqual(['type', 'title', 'status', 'code', 'detail', 'trace_id'])
  })

  test('every operation has a summary and exactly its path parameters; a JSON object body on every write but the state changes (suspend, activate, verify, revoke), none on a GET', () => {
    for (const { path, method, operation } of operations()) {
      const parameters = (operation.parameters ?? []).filter((p: { in: string }) => p.in === 'path').map((p: { name: string }) => p.name)
      const takesBody = method !== 'get' && !/\/(suspend|activate|verify|revoke)$/.test(path)
      expect({ path, method, summary: typeof operation.summary, parameters, body: operation.requestBody?.content['application/json'].schema.type }).toEqual({
        path,
        method,
        summary: 'string',
        parameters: [...path.matchAll(/\{([a-z_]+)\}/g)].map((m) => m[1]),
        body: takesBody ? 'object' : undefined,
      })
    }
  })

  test("the organizations' request schemas are the ones that validate", () => {
    const body = (method: string, path: string) => document.paths[path][method].requestBody.content['application/json'].schema
    const create = body('post', '/api/organizations')
    expect(Object.keys(create.properties).sort()).toEqual(['description', 'parent_id', 'supported_environments'])
    expect(create.required).toEqual(['description'])
    expect(create.properties.supported_environments.required.sort()).toEqual(['default', 'supported'])
    expect(body('patch', '/api/organizations/{organization_id}').required).toEqual(['description'])
    expect(Object.keys(body('patch', '/api/organizations/{organization_id}/environments').properties).sort()).toEqual(['default', 'environment'])
    expect(body('delete', '/api/organizations/{organization_id}/environments').required).toEqual(['environment'])
  })

  test('servers is the configured public URL; the bearer scheme secures every /api operation and /metrics', () => {
    expect(document.servers).toEqual([{ url: 'http://keyward.test', description: 'This server' }])
    expect(document.security).toEqual([{ bearer: [] }])
    const needsToken = (path: string) => path.startsWith('/api/') || path === '/metrics'
    for (const { path, operation } of operations()) {
      expect({ path, security: operation.security }).toEqual({ path, security: needsToken(path) ? undefined : [] })
    }
  })

  test('every /api operation lists 401, 429, 500 and 503, and 413 and 415 unless a GET (whose body is never read), and only named problem responses for errors', () => {
    for (const { path, method, operation } of operations()) {
      const statuses = Object.keys(operation.responses)
      if (path.startsWith('/api/')) for (const status of ['401', '429', '500', '503']) expect(statuses).toContain(status)
      if (path.startsWith('/api/')) expect({ path, method, bodyErrors: ['413', '415'].filter((s) => statuses.includes(s)) }).toEqual({ path, method, bodyErrors: method === 'get' ? [] : ['413', '415'] })
      for (const status of statuses.filter((s) => Number(s) >= 400)) {
        expect(operation.responses[status].$ref).toStartWith('#/components/responses/')
      }
    }
    const problem = document.components.responses.NotFound.content['application/problem+json'].schema
    // Typed as well as narrowed (orval read an untyped const as a string, and the error type as empty).
    expect(problem).toEqual({
      allOf: [{ $ref: '#/components/schemas/Problem' }, { type: 'object', properties: { status: { type: 'integer', const: 404 }, code: { type: 'string', enum: ['not_found'] } } }],
    })
    // Headers over 16 KiB: Bun's answer, with no body; any request may meet it, as info says. Listed
    // only where no other 4xx is (the probes): a bodiless error beside the problems made hey-api's error type `unknown`.
    expect(document.info.description).toContain('431')
    const has4xx = (operation: any) => Object.keys(operation.responses).some((status) => status >= '400' && status < '500' && status !== '431')
    for (const { path, method, operation } of operations()) expect({ path, method, lists431: '431' in operation.responses }).toEqual({ path, method, lists431: !has4xx(operation) })
    expect(operations().filter(({ operation }) => operation.responses['431']).map(({ path }) => path)).toEqual(['/healthz', '/readyz'])
    expect(document.components.responses.RequestHeaderFieldsTooLarge.content).toBeUndefined()
  })

  test('the rate-limit headers: on every answer of an /api operation and of the documents, Retry-After on 429; none on the probes', () => {
    for (const { path, operation } of operations()) {
      for (const [status, response] of Object.entries<any>(operation.responses)) {
        if (status === '431') continue // Bun's own answer, before keyward: no headers of keyward's
        const headers = response.$ref ? document.components.responses[response.$ref.split('/').pop()].headers : response.headers
        if (path.startsWith('/api/')) expect(Object.keys(headers)).toContain('ratelimit')
        if (path.startsWith('/api/')) expect(Object.keys(headers)).toContain('ratelimit-policy')
        if (!operation.security && Number(status) < 400) expect(Object.keys(headers)).toContain('ratelimit')
        // A public route has them when it is limited (the documents, charged to the address): it lists 429 then.
        const limited = '429' in operation.responses
        if (operation.security?.length === 0 && Number(status) < 400) expect({ path, ratelimit: Object.keys(headers).includes('ratelimit') }).toEqual({ path, ratelimit: limited })
      }
    }
    expect(document.components.responses.TooManyRequests.headers['retry-after']).toEqual({ $ref: '#/components/headers/RetryAfter' })
    const limitedPublic = operations().filter((o) => o.operation.security?.length === 0 && '429' in o.operation.responses).map((o) => o.path)
    expect(limitedPublic.sort()).toEqual(['/docs', '/docs/scalar.js', '/openapi.json'])
  })

  test('idempotent creates answer 201 or 200, the other creates 201 only', () => {
    const codes = (path: string) => Object.keys(document.paths[path].post.responses).filter((s) => s < '300')
    for (const path of ['/api/consumers', '/api/installations', '/api/enrollments']) expect(codes(path)).toEqual(['200', '201'])
    for (const path of ['/api/organizations', '/api/applications', '/api/enrollments/{enrollment_id}/keysets']) expect(codes(path)).toEqual(['201'])
  })

  test('paging parameters are integers with their bounds; list filters are repeatable UUID arrays', () => {
    const parameter = (name: string) => document.paths['/api/consumers'].get.parameters.find((p: { name: string }) => p.name === name)
    expect(parameter('page').schema).toEqual({ type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER })
    expect(parameter('page_size').schema).toEqual({ type: 'integer', minimum: 1, maximum: 1000, default: 100 })
    expect(parameter('consumer_ids')).toMatchObject({ style: 'form', explode: true, schema: { type: 'array', items: { format: 'uuid' } } })
  })

  test("every multi-value filter states the server's bound; the audit trail's actions are its action names; since and until their two time forms", async () => {
    const arrays = operations().flatMap(({ path, operation }) =>
      (operation.parameters ?? []).filter((p: { in: string; schema: { type?: string } }) => p.in === 'query' && p.schema.type === 'array').map((p: { name: string; schema: unknown }) => ({ path, name: p.name, schema: p.schema })),
    )
    expect(arrays.length).toBeGreaterThan(10)
    expect(arrays.filter((a: { schema: { maxItems?: number } }) => a.schema.maxItems !== MAX_FILTER_VALUES_SENT)).toEqual([])
    const audit = (name: string) => document.paths['/api/audit-events'].get.parameters.find((p: { name: string }) => p.name === name)
    expect(audit('actions')).toMatchObject({ style: 'form', explode: true, schema: { type: 'array', items: { type: 'string', enum: [...AUDIT_ACTIONS] } } })
    // The server's own answer to each example agrees with the pattern.
    const since = new RegExp(audit('since').schema.pattern)
    for (const [time, accepted] of [
      ['2026-05-01 12:00:00.000000 +00:00', true],
      ['2026-05-01T12:00:00Z', true],
      ['2026-05-01T14:00:00.5+02:00', true],
      ['2026-05-01', false],
      ['yesterday', false],
    ] as const) {
      expect({ time, pattern: since.test(time) }).toEqual({ time, pattern: accepted })
      const res = await h.request('GET', `/api/audit-events?since=${encodeURIComponent(time)}`)
      expect({ time, status: res.status }).toEqual({ time, status: accepted ? 200 : 400 })
    }
  })

  test('the rules JSON Schema can say: UUID and environment patterns, non-blank descriptions, one of default and environment', () => {
    const body = (method: string, path: string) => document.paths[path][method].requestBody.content['application/json'].schema
    const pathParameter = document.paths['/api/consumers/{consumer_id}'].get.parameters[0]
    expect(new RegExp(pathParameter.schema.pattern).test('6BEB3693-f0ca-4ba1-8157-999fc5e297be')).toBe(true)
    expect(new RegExp(pathParameter.schema.pattern).test('not-a-uuid')).toBe(false)
    const description = body('post', '/api/installations').properties.description
    expect(description).toMatchObject({ minLength: 1, maxLength: 1024 })
    expect(new RegExp(description.pattern).test(' \t ')).toBe(false)
    expect(new RegExp(body('post', '/api/environments/{application_id}').properties.environment.pattern).test('pre-prod_2')).toBe(true)
    expect(body('post', '/api/consumers').properties.organization_id.description).toContain('required for vendor tokens')
  })

  test("every schema of the document compiles under Ajv 2020's strict mode, as an integrator's validator may run it (docs/api.md)", () => {
    const ajv = new Ajv2020({ strict: true })
    addFormats(ajv)
    // Each schema on its own, the components as its $defs.
    const local = (schema: unknown) => JSON.parse(JSON.stringify(schema).replaceAll('#/components/schemas/', '#/$defs/'))
    const $defs = local(document.components.schemas)
    const schemas: [string, unknown][] = Object.entries<any>(document.components.schemas).map(([name, schema]) => [name, schema])
    for (const [path, operations] of Object.entries<any>(document.paths)) {
      for (const [method, operation] of Object.entries<any>(operations)) {
        const body = operation.requestBody?.content?.['application/json']?.schema
        if (body) schemas.push([`${method} ${path} body`, body])
        for (const parameter of operation.parameters ?? []) schemas.push([`${method} ${path} ${parameter.name}`, parameter.schema])
        for (const [status, response] of Object.entries<any>(operation.responses)) {
          for (const [type, content] of Object.entries<any>(response.content ?? {})) schemas.push([`${method} ${path} ${status} ${type}`, content.schema])
        }
      }
    }
    const refused = schemas.flatMap(([name, schema]) => {
      try {
        ajv.compile({ ...local(schema), $defs })
        return []
      } catch (error) {
        return [`${name}: ${(error as Error).message}`]
      }
    })
    expect(refused).toEqual([])
    expect(schemas.length).toBeGreaterThan(100)
  })

  test('request bodies say what the server refuses: exactly one of default and environment, a ttl it parses, names trimmed of spaces and tabs only', () => {
    const ajv = new Ajv2020({ strict: false })
    const fits = (method: string, path: string, value: unknown) => ajv.validate(document.paths[path][method].requestBody.content['application/json'].schema, value)
    const environments = '/api/organizations/{organization_id}/environments'
    expect([{ default: 'prod' }, { environment: 'test' }, {}, { default: 'prod', environment: 'test' }].map((value) => fits('patch', environments, value))).toEqual([true, true, false, false])
    const token = (ttl: string) => fits('post', '/api/tokens', { organization_id: crypto.randomUUID(), role: 'viewer', ttl })
    expect(['45s', '30m', '12h', '90d', '366d'].filter((ttl) => !token(ttl))).toEqual([])
    expect(['1w', '90D', ' 90d', '1.5d', 'abc', ''].filter(token)).toEqual([])
    const supported = (list: unknown) => fits('post', '/api/organizations', { description: 'x', parent_id: crypto.randomUUID(), supported_environments: { default: 'PROD', supported: list } })
    expect([' prod ,\ttest', ['\tprod ']].filter((list) => !supported(list))).toEqual([])
    expect(['prod,\ntest', 'prod,\u00a0test', ['prod\n']].filter(supported)).toEqual([])
    // A bound JSON Schema cannot state (different names once uppercased) is in the description.
    const supportedField = document.paths['/api/organizations'].post.requestBody.content['application/json'].schema.properties.supported_environments.properties.supported
    expect(supportedField.description).toContain(`at most ${MAX_ENVIRONMENTS} different ones`)
  })

  test('the answers that hold a secret shown once (a new token, a new application) list Cache-Control: no-store, as they send it', async () => {
    const listed = operations()
      .filter(({ operation }) => Object.values<any>(operation.responses).some((response) => response.headers?.['cache-control']))
      .map(({ operation }) => operation.operationId)
    expect(listed.sort()).toEqual(['createApplication', 'createToken'])
    expect(document.components.headers.NoStore.schema).toEqual({ type: 'string', const: 'no-store' })
    const customer = await h.createCustomer('Secrets')
    const application = await h.request('POST', '/api/applications', { body: { organization_id: customer, description: 'App' } })
    const token = await h.request('POST', '/api/tokens', { body: { organization_id: customer, role: 'viewer' } })
    expect([application.status, application.headers.get('cache-control'), token.status, token.headers.get('cache-control')]).toEqual([201, 'no-store', 201, 'no-store'])
  })

  test('success bodies are exact: records are named schemas without extra properties', () => {
    const answer = document.paths['/api/consumers/{consumer_id}'].get.responses['200'].content['application/json'].schema
    expect(answer.properties.consumer).toEqual({ $ref: '#/components/schemas/Consumer' })
    expect(document.components.schemas.Consumer.additionalProperties).toBe(false)
    const list = document.paths['/api/installations'].get.responses['200'].content['application/json'].schema
    expect(list.anyOf).toHaveLength(2)
  })

  test("a problem's code is one of the codes docs/api.md lists by status, an enum a generated client can switch on", () => {
    const all = Object.values(PROBLEM_CODES).flat()
    expect(document.components.schemas.Problem.properties.code.enum).toEqual(all)
    // Each error response narrows it to its status's codes.
    for (const [status, codes] of Object.entries(PROBLEM_CODES)) {
      const response = Object.values(document.components.responses as Record<string, any>).find((r) => r.content?.['application/problem+json']?.schema.allOf?.[1].properties.status.const === Number(status))
      expect({ status, codes: response?.content['application/problem+json'].schema.allOf[1].properties.code.enum }).toEqual({ status, codes: [...codes] })
    }
    // docs/api.md's table, "Codes by status": the same codes, the statuses of a shared row together.
    const rows = [...readFileSync(`${import.meta.dir}/../../docs/api.md`, 'utf8').matchAll(/^\| (`\d{3}`(?:, `\d{3}`)*) \| (`[a-z_]+`(?:, `[a-z_]+`)*) \|$/gm)]
    const documented = rows.flatMap((row) => [...row[2]!.matchAll(/`([a-z_]+)`/g)].map((code) => code[1]))
    expect(documented.sort()).toEqual([...all].sort())
  })
})

describe('the answer check', () => {
  const check = () => answerChecker(documentText)
  const json = new Headers({ 'content-type': 'application/json' })
  const problemHeaders = new Headers({ 'content-type': 'application/problem+json' })
  const consumer = { consumer_id: crypto.randomUUID(), state: 'active', created: '2025-01-31 09:15:02.123456 +00:00', modified: '2025-01-31 09:15:02.123456 +00:00' }
  const problem = { type: 'about:blank', title: 'Not Found', status: 404, code: 'not_found', detail: 'x', trace_id: crypto.randomUUID() }

  test('passes an answer that fits', () => {
    check()('GET', `/api/consumers/${consumer.consumer_id}`, { status: 200, headers: json, body: { consumer, trace_id: crypto.randomUUID() } })
    check()('GET', '/no/such/route', { status: 404, headers: problemHeaders, body: problem })
  })

  test('fails a status the operation does not list, an extra or missing field, a wrong type, an unknown route not 404', () => {
    const url = `/api/consumers/${consumer.consumer_id}`
    expect(() => check()('GET', url, { status: 201, headers: json, body: { consumer, trace_id: crypto.randomUUID() } })).toThrow('does not list for getConsumer')
    expect(() => check()('GET', url, { status: 200, headers: json, body: { consumer: { ...consumer, extra: 1 }, trace_id: crypto.randomUUID() } })).toThrow('does not fit')
    expect(() => check()('GET', url, { status: 200, headers: json, body: { consumer } })).toThrow('does not fit')
    expect(() => check()('GET', url, { status: 200, headers: json, body: { consumer: { ...consumer, state: 'gone' }, trace_id: crypto.randomUUID() } })).toThrow('does not fit')
    expect(() => check()('GET', url, { status: 404, headers: json, body: problem })).toThrow('content type application/json')
    expect(() => check()('GET', '/no/such/route', { status: 200, headers: json, body: {} })).toThrow('no such operation')
  })

  test('the consumer list has `page` only as sent; the installation list has two shapes and no mix of them', () => {
    const list = { consumers: [consumer], total: 1, page_size: 100 }
    check()('GET', '/api/consumers', { status: 200, headers: json, body: list })
    check()('GET', '/api/consumers?page=2', { status: 200, headers: json, body: { ...list, page: 2 } })
    expect(() => check()('GET', '/api/consumers', { status: 200, headers: json, body: { ...list, page: '2' } })).toThrow('does not fit')
    const installations: unknown[] = []
    check()('GET', '/api/installations', { status: 200, headers: json, body: { installations, trace_id: crypto.randomUUID() } })
    check()('GET', '/api/installations', { status: 200, headers: json, body: { installations, total: 0, page: 1, page_size: 100 } })
    expect(() =>
      check()('GET', '/api/installations', { status: 200, headers: json, body: { installations, total: 0, page: 1, page_size: 100, trace_id: crypto.randomUUID() } }),
    ).toThrow('does not fit')
  })
})
