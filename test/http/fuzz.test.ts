/**
 * Property-based fuzzing of every route the app has (read from `app.routes`, so a new route is
 * covered without touching this file): odd path identifiers, random, missing, extra and mistyped
 * body fields, arbitrary JSON, huge and deeply nested bodies, invalid UTF-8, odd content types,
 * query values, methods and Authorization headers. Whatever is sent, every answer must hold the
 * invariants of docs/api.md "Status codes and errors": never a 5xx, every error an RFC 9457 problem whose trace id is
 * the x-trace-id header, no stack trace or internals, no echo of a token; and the app must still
 * answer afterwards (each request has a time limit, so a stall fails too).
 *
 * Seeded and replayable: the seed is fixed unless FUZZ_SEED is set, FUZZ_RUNS sets the runs per
 * property (a long run: `FUZZ_RUNS=20000 bun test test/http/fuzz.test.ts`). fast-check prints the
 * seed, the replay path and the shrunk request on failure; pass them back as FUZZ_SEED and
 * FUZZ_PATH to replay one. The app's state is shared by all runs (requests may change it), so a
 * counterexample is reported with the full request that broke an invariant, and for a 500 the line
 * the app logged. FUZZ_STATS=1 prints how often each route answered each status and code.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { createHmac } from 'node:crypto'
import { STATUS_CODES } from 'node:http'
import { newToken, tokenIdOf, type Role } from '../../src/auth/tokens'
import { createHarness, type Harness } from '../support/harness'
import { populatedTenant, requestOk, p256PublicKey, UUID_LOWER } from '../support/fixtures'

const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 20_251_122
const RUNS = process.env.FUZZ_RUNS ? Number(process.env.FUZZ_RUNS) : 300
const PATH = process.env.FUZZ_PATH
const REQUEST_LIMIT_MS = 5000
/**
 * bun's per-test limit (its default, 5 s, is too short on a busy machine: the store would be closed
 * under a test still running), scaled to the runs asked for, with room to shrink a stall (5 s a try).
 */
const TEST_LIMIT_MS = Math.max(120_000, RUNS * 50)
const LIMIT = 64 * 1024
const ROLES: Role[] = ['admin', 'application_admin', 'viewer']

const SNAKE = /^[a-z]+(_[a-z0-9]+)*$/
/** What a stack trace or the framework's internals look like in a body. */
const LEAKS = [/\bat [^\s"]*[/\\][^\s"]*:\d+/, /\n\s+at /, /node_modules/, /\.ts:/, /\.js:\d/]
const leaks = (text: string) => LEAKS.some((re) => re.test(text))

let h: Harness

/** Records of every kind, in two tenants, and a pool of tokens and ids to aim with. */
interface World {
  readonly ids: Record<'organization_id' | 'application_id' | 'consumer_id' | 'installation_id' | 'enrollment_id' | 'token_id', string[]>
  /** Valid tokens: every role of the vendor, customers A and B, their partners. */
  readonly tokens: string[]
  /** Tokens that authenticate nobody: expired, revoked, of a suspended organization, forged, of earlier versions. */
  readonly deadTokens: string[]
  readonly validKey: string
}
let world: World

/** A token of earlier versions (HMAC-signed claims, no record), over any claims at all. */
function earlierVersion(claims: unknown): string {
  const body = Buffer.from(JSON.stringify(claims)).toString('base64url')
  const signature = createHmac('sha256', 'a secret of an old data dir').update('kw1.').update(body).digest('base64url')
  return `kw1.${body}.${signature}`
}

async function tenant(name: string, withEnvironments = false) {
  const { customer, partner, app, app2, consumer, installation, enrollment } = await populatedTenant(h, name, withEnvironments)
  const apps = [app, app2]
  const tokens = [customer, partner].flatMap((org) => ROLES.map((role) => h.token(org, role)))
  return { orgs: [customer, partner], apps, consumer, installation, enrollment, tokens }
}

beforeAll(async () => {
  // Snapshots every 32 KiB of log: compaction runs again and again under the fuzzing.
  h = await createHarness({ store: { compactAfterBytes: 32 * 1024 } })
  const a = await tenant('A', true)
  const b = await tenant('B')
  const suspended = await h.createCustomer('Suspended')
  await requestOk(h, 'PATCH', `/api/organizations/${suspended}/suspend`)
  const vendorTokens = ROLES.map((role) => h.token(h.vendorId, role))
  const revoked = h.token(h.vendorId, 'admin')
  await requestOk(h, 'PATCH', `/api/tokens/${tokenIdOf(revoked)}/revoke`)
  const [, id, secret] = h.vendorToken.split('_') as [string, string, string]
  world = {
    ids: {
      organization_id: [h.vendorId, ...a.orgs, ...b.orgs, suspended],
      application_id: [...a.apps, ...b.apps],
      consumer_id: [a.consumer, b.consumer],
      installation_id: [a.installation, b.installation],
      enrollment_id: [a.enrollment, b.enrollment],
      // Tokens to aim at (revoke, view), none of them one the fuzzing authenticates with.
      token_id: [revoked, h.token(a.orgs[0]!, 'viewer'), h.token(b.orgs[0]!, 'admin')].map((token) => tokenIdOf(token)!),
    },
    tokens: [...vendorTokens, ...a.tokens, ...b.tokens],
    deadTokens: [
      h.token(h.vendorId, 'admin', -10),
      h.token(suspended, 'admin'),
      revoked,
      `kw2_${id}_${secret.slice(0, -2)}${secret.endsWith('AA') ? 'BB' : 'AA'}`,
      `kw2_${id}`,
      `kw2_${id}_`,
      `kw2_${id.toUpperCase()}_${secret}`,
      `kw2_${'0'.repeat(32)}_${secret}`,
      `kw2_${'f'.repeat(32)}_${'_'.repeat(43)}`,
      newToken().token,
      earlierVersion({ org: h.vendorId, role: 'admin', exp: 4e9 }),
      earlierVersion({ org: '__proto__', role: 'admin', exp: 4e9 }),
      earlierVersion(null),
    ],
    validKey: p256PublicKey(),
  }
  await h.tokensRecorded() // the fuzzing calls app.handle itself
})
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// Routes, from the app itself and its OpenAPI document (the body and query schemas' field names).

interface Route {
  readonly method: string
  readonly path: string
  readonly params: string[]
  readonly bodyKeys: string[]
  readonly queryKeys: string[]
}

function routes(): Route[] {
  return h.app.routes.map((r) => ({
    method: r.method,
    path: r.path,
    params: [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!),
    bodyKeys: [],
    queryKeys: [],
  }))
}

/** Field names of each route's body and query schema, read from GET /openapi.json. */
async function describedRoutes(): Promise<Route[]> {
  const res = await h.request('GET', '/openapi.json', { token: null })
  expect(res.status).toBe(200)
  const paths = res.body.paths as Record<string, Record<string, OpenApiOperation>>
  return routes().map((route) => {
    const operation = paths[route.path.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[route.method.toLowerCase()]
    const schema = operation?.requestBody?.content?.['application/json']?.schema
    return {
      ...route,
      bodyKeys: propertyNames(schema),
      queryKeys: (operation?.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
    }
  })
}

interface OpenApiOperation {
  requestBody?: { content?: Record<string, { schema?: unknown }> }
  parameters?: { name: string; in: string }[]
}

/** Top-level property names of an object schema, also under allOf/anyOf/oneOf. */
function propertyNames(schema: unknown, into = new Set<string>()): string[] {
  if (schema && typeof schema === 'object') {
    const s = schema as Record<string, unknown>
    for (const name of Object.keys((s.properties as object) ?? {})) into.add(name)
    for (const key of ['allOf', 'anyOf', 'oneOf'] as const) for (const sub of (s[key] as unknown[]) ?? []) propertyNames(sub, into)
  }
  return [...into]
}

// ---------------------------------------------------------------------------------------------
// Requests: a plain description (printable in a counterexample), sent with a time limit.

type Body =
  | { readonly kind: 'none' }
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'bytes'; readonly bytes: number[] }
  /** Streamed in chunks: no content-length known in advance. */
  | { readonly kind: 'stream'; readonly text: string }

interface Req {
  readonly method: string
  /** Path and query, as sent (not normalised here). */
  readonly url: string
  /** Header name → value; `authorization` may be absent. */
  readonly headers: Record<string, string>
  readonly body: Body
}

interface Res {
  readonly status: number
  readonly headers: Headers
  readonly text: string
}

const cut = (s: string, n = 300) => (s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s)

function show(req: Req): string {
  const body =
    req.body.kind === 'none'
      ? 'no body'
      : req.body.kind === 'bytes'
        ? `bytes [${req.body.bytes.slice(0, 40).join(',')}${req.body.bytes.length > 40 ? ',…' : ''}] (${req.body.bytes.length})`
        : `${req.body.kind} ${cut(JSON.stringify(req.body.text))}`
  const headers = Object.entries(req.headers).map(([k, v]) => `${k}: ${cut(v, 120)}`)
  return `${req.method} ${cut(req.url, 200)} [${headers.join(' | ')}] ${body}`
}

function bodyInit(body: Body): RequestInit['body'] {
  switch (body.kind) {
    case 'none':
      return undefined
    // Bytes, not a string: a string body would get a default text/plain content type.
    case 'text':
      return new TextEncoder().encode(body.text)
    case 'bytes':
      return new Uint8Array(body.bytes)
    case 'stream': {
      const bytes = new TextEncoder().encode(body.text)
      let at = 0
      return new ReadableStream<Uint8Array>({
        pull(controller) {
          if (at >= bytes.length) return controller.close()
          controller.enqueue(bytes.slice(at, at + 8192))
          at += 8192
        },
      })
    }
  }
}

async function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${REQUEST_LIMIT_MS} ms: ${what}`)), REQUEST_LIMIT_MS)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

async function send(req: Req): Promise<Res> {
  const canHaveBody = req.method !== 'GET' && req.method !== 'HEAD'
  const request = new Request(`http://localhost${req.url}`, {
    method: req.method,
    headers: req.headers,
    body: canHaveBody ? bodyInit(req.body) : undefined,
  })
  return within(
    (async () => {
      const response = await h.app.handle(request)
      return { status: response.status, headers: response.headers, text: new TextDecoder().decode(await response.arrayBuffer()) }
    })(),
    show(req),
  )
}

const traceIds = new Set<string>()

/** the rules of docs/api.md "Status codes and errors", for any request whatsoever. */
function checkInvariants(req: Req, res: Res): void {
  const fail = (why: string): never => {
    // A 500 is logged with its trace id: show the log line (the stack) with the request.
    const trace = res.headers.get('x-trace-id')
    const logged = trace ? h.logged.filter((line) => line.includes(trace)).map((line) => `\n  logged: ${cut(line, 3000)}`) : []
    throw new Error(`${why}\n  request: ${show(req)}\n  answer: ${res.status} ${res.headers.get('content-type')} ${cut(res.text, 600)}${logged.join('')}`)
  }
  if (res.status >= 500) fail(`status ${res.status}`)
  const traceId = res.headers.get('x-trace-id')
  if (!traceId || !UUID_LOWER.test(traceId)) fail('no x-trace-id header holding a UUID_LOWER')
  if (traceIds.has(traceId!)) fail('x-trace-id reused')
  traceIds.add(traceId!)
  // A HEAD answer may carry no body; everything else about it still holds.
  const bodyless = req.method === 'HEAD' && res.text === ''
  if (res.status >= 400) {
    if (res.headers.get('content-type') !== 'application/problem+json') fail('an error that is not application/problem+json')
    if (!bodyless) {
      let problem: Record<string, unknown>
      try {
        problem = JSON.parse(res.text)
      } catch {
        return fail('an error body that is not JSON')
      }
      if (!problem || typeof problem !== 'object' || Array.isArray(problem)) fail('an error body that is not an object')
      if (problem.type !== 'about:blank') fail('problem type is not about:blank')
      if (problem.title !== STATUS_CODES[res.status]) fail('problem title is not the reason phrase')
      if (problem.status !== res.status) fail('problem status differs from the HTTP status')
      if (typeof problem.code !== 'string' || !SNAKE.test(problem.code)) fail('problem code is not snake_case')
      if (typeof problem.detail !== 'string' || problem.detail.length === 0) fail('problem without detail')
      if (problem.trace_id !== traceId) fail('problem trace_id differs from x-trace-id')
    }
  } else if (!bodyless && res.text !== '' && res.headers.get('content-type')?.startsWith('application/json')) {
    const body = JSON.parse(res.text)
    // Where a success body has a trace id, it is the header's (the consumer and enrollment lists have none).
    if (body && typeof body === 'object' && 'trace_id' in body && body.trace_id !== traceId) fail('trace_id differs from x-trace-id')
  }
  if (leaks(res.text)) fail('a stack trace or internals in the body')
  // A success may show what was sent (a description, say); an error never shows a token sent anywhere.
  if (res.status >= 400) for (const token of plantedTokens(req)) if (res.text.includes(token)) fail('an error echoes a token sent in the request')
  for (const token of sentTokens(req)) if (res.text.includes(token)) fail('the body echoes a bearer token that was sent')
  for (const [name, value] of res.headers) {
    if (name === 'x-trace-id' || name === 'content-type') continue
    for (const token of sentTokens(req)) if (value.includes(token)) fail(`header ${name} echoes a bearer token`)
  }
}

/** Whatever could be a token in the Authorization header (long enough not to match by chance). */
function sentTokens(req: Req): string[] {
  const header = req.headers.authorization
  if (!header) return []
  return header.split(/[\s,"]+/).filter((part) => part.length >= 12)
}

/** Tokens of the world that the request carries outside its Authorization header. */
function plantedTokens(req: Req): string[] {
  const text = `${decodeURIComponentSafe(req.url)} ${req.body.kind === 'text' || req.body.kind === 'stream' ? req.body.text : ''}`
  return [...world.tokens, ...world.deadTokens].filter((token) => text.includes(token))
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

/** The app still answers, with and without a token, and still writes. */
async function stillAlive(): Promise<void> {
  const health = await within(h.app.handle(new Request('http://localhost/healthz')), 'GET /healthz')
  expect(health.status).toBe(200)
  expect(await health.json()).toEqual({ status: 'ok' })
  const list = await within(h.request('GET', '/api/organizations'), 'GET /api/organizations')
  expect(list.status).toBe(200)
}

/** The request must not itself carry what the leak check looks for (a description may be echoed). */
function carriesLeakMarkers(req: Req): boolean {
  const parts = [req.url, ...Object.values(req.headers)]
  if (req.body.kind === 'text' || req.body.kind === 'stream') {
    parts.push(req.body.text)
    try {
      parts.push(JSON.stringify(JSON.parse(req.body.text)))
    } catch {}
  }
  return parts.some(leaks)
}

// ---------------------------------------------------------------------------------------------
// Generators.

type IdKind = keyof World['ids']
const ID_KINDS: IdKind[] = ['organization_id', 'application_id', 'consumer_id', 'installation_id', 'enrollment_id', 'token_id']

/** Path segments that are not identifiers at all, raw (already URL-encoded where needed). */
const ODD_SEGMENTS = [
  '..',
  '.',
  '%2e%2e',
  '%2E%2E%2F%2E%2E',
  '%00',
  '%',
  '%zz',
  '%ff%fe',
  '%C0%AE',
  '%2F',
  '%5C',
  '%20',
  '%0A%0D',
  'null',
  'undefined',
  '-1',
  '0',
  '1e309',
  'NaN',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-ffff-ffff-ffffffffffff',
  '{00000000-0000-4000-8000-000000000000}',
  '00000000000040008000000000000000',
  '00000000-0000-4000-8000-0000000000000',
  'g0000000-0000-4000-8000-000000000000',
  encodeURIComponent('ü'.repeat(20)),
  encodeURIComponent('\u202e\u0000\ud83d\ude00'),
  'p'.repeat(10 * 1024),
  `${'%2e'.repeat(100)}`,
  'a;b=c',
  'a?x=1',
  'a#frag',
]

/** A path parameter: a real id of its kind (any tenant), another kind's, a random UUID_LOWER, odd text. */
function paramValue(name: string): fc.Arbitrary<string> {
  const own = (world.ids as Record<string, string[]>)[name] ?? world.ids.organization_id
  const everyId = ID_KINDS.flatMap((kind) => world.ids[kind])
  return fc.oneof(
    { weight: 5, arbitrary: fc.constantFrom(...own) },
    { weight: 1, arbitrary: fc.constantFrom(...own).map((id) => id.toUpperCase()) },
    { weight: 1, arbitrary: fc.constantFrom(...everyId) },
    { weight: 1, arbitrary: fc.uuid() },
    { weight: 2, arbitrary: fc.constantFrom(...ODD_SEGMENTS) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }).map(encodeURIComponent) },
  )
}

function pathFor(route: Route): fc.Arbitrary<string> {
  if (route.params.length === 0) return fc.constant(route.path)
  return fc.tuple(...route.params.map(paramValue)).map((values) => {
    let path = route.path
    route.params.forEach((name, i) => (path = path.replace(`:${name}`, values[i]!)))
    return path
  })
}

const mistyped: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom(1e308, -0, 2 ** 53 + 1, ''),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
)

const environmentName = fc.oneof(
  fc.constantFrom('PROD', 'prod', 'DEV', 'dev', 'PRODUCTION', 'STAGING', 'QA', ' prod', 'prod ', 'A'.repeat(32), 'A'.repeat(33), '', 'p r', 'ÄÖ', 'dev,prod'),
  fc.string({ maxLength: 12 }),
)

/** A value the field accepts, by its name, aimed at real records where it names one. */
function validValue(name: string): fc.Arbitrary<unknown> {
  const { ids } = world
  switch (name) {
    case 'parent_id':
      return fc.constantFrom(...ids.organization_id)
    case 'organization_id':
      // Mostly customers (index 1 and 3 are customers A and B), sometimes the vendor or a partner.
      return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(ids.organization_id[1]!, ids.organization_id[3]!) }, { weight: 1, arbitrary: fc.constantFrom(...ids.organization_id) })
    case 'application_id':
      return fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...ids.application_id) }, { weight: 1, arbitrary: fc.uuid() })
    case 'consumer_id':
    case 'installation_id':
    case 'enrollment_id':
      return fc.oneof({ weight: 2, arbitrary: fc.uuid() }, { weight: 1, arbitrary: fc.constantFrom(...ids[name]) })
    case 'description':
    case 'installation_description':
      return fc.string({ minLength: 1, maxLength: 30 }).filter((s) => s.trim().length > 0)
    case 'environment':
    case 'default':
      return fc.constantFrom('PROD', 'DEV', 'dev', 'PRODUCTION', 'STAGING', 'QA')
    case 'allowed_environments':
    case 'supported':
      return fc.constantFrom('DEV,PROD', 'PROD', ['dev'], ['PROD', 'DEV', 'QA'], 'PRODUCTION')
    case 'supported_environments':
      return fc.constantFrom({ default: 'PROD', supported: 'DEV,PROD' }, { default: 'dev', supported: ['dev'] })
    case 'client_enclave_key':
      return fc.constant(world.validKey)
    case 'role':
      return fc.constantFrom('admin', 'administrator', 'application_admin', 'viewer', 'root', 'Admin')
    case 'ttl':
      return fc.constantFrom('90d', '366d', '367d', '8784h', '8785h', '0d', '1s', '30m', '1y', '', '-1d')
    default:
      return fc.jsonValue({ maxDepth: 1 })
  }
}

/** A value the field does not quite accept (or may, barely), by its name. */
function oddValue(name: string): fc.Arbitrary<unknown> {
  const everyId = ID_KINDS.flatMap((kind) => world.ids[kind])
  if (name.endsWith('_id')) {
    return fc.oneof(
      fc.constantFrom(...everyId),
      fc.constantFrom(...everyId).map((id) => id.toUpperCase()),
      fc.constantFrom('..', 'not-a-uuid', '00000000-0000-0000-0000-000000000000', ` ${everyId[0]}`, `${everyId[0]}\u0000`, `{${everyId[0]}}`),
    )
  }
  if (name.includes('description')) {
    return fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'grapheme', maxLength: 40 }),
      fc.constantFrom('', ' ', '\t\n', 'x'.repeat(1024), 'x'.repeat(1025), '😀'.repeat(1024), '😀'.repeat(1025), '\u0000', '\ud800'),
    )
  }
  if (name === 'environment' || name === 'default') return environmentName
  if (name === 'allowed_environments' || name === 'supported') {
    return fc.oneof(environmentName, fc.array(environmentName, { maxLength: 4 }), fc.constantFrom('dev, prod,DEV', ',', ',,PROD', []))
  }
  if (name === 'supported_environments') {
    return fc.record({ default: fc.oneof(environmentName, mistyped), supported: fc.oneof(environmentName, mistyped) }, { requiredKeys: [] })
  }
  if (name === 'client_enclave_key') {
    return fc.oneof(
      fc.constant(world.validKey.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')),
      fc.constant(`-----BEGIN PUBLIC KEY-----\n${world.validKey}\n-----END PUBLIC KEY-----`),
      fc.constant(`-----BEGIN PUBLIC KEY-----\n${world.validKey.slice(5)}\n-----END PUBLIC KEY-----`),
      fc.constant(world.validKey.slice(0, -8)),
      fc.base64String({ maxLength: 200 }),
      fc.string({ maxLength: 40 }),
      fc.constantFrom('', '=', '-----BEGIN PUBLIC KEY-----', 'A'.repeat(60_000)),
    )
  }
  return fc.jsonValue({ maxDepth: 2 })
}

/** A field's value: mostly accepted, often odd, sometimes of the wrong type. */
const fieldValue = (name: string) =>
  fc.oneof(
    { weight: 8, arbitrary: validValue(name) },
    { weight: 4, arbitrary: oddValue(name) },
    { weight: 2, arbitrary: mistyped },
    // A token where it does not belong: an error must not echo it. (Never as a description, which
    // would be stored and rightly shown by later reads.)
    {
      weight: 1,
      arbitrary: fc
        .tuple(fc.constantFrom(...world.tokens, ...world.deadTokens), fc.nat(name.includes('description') ? { max: 1 } : { max: 2 }))
        .map(([t, i]) => [[t], { token: t }, t][i]),
    },
  )

/** A JSON object over the schema's fields (all of them, or any subset) plus extras. */
function schemaBody(keys: string[]): fc.Arbitrary<string> {
  const model = Object.fromEntries(keys.map((k) => [k, fieldValue(k)]))
  const valid = fc.record(Object.fromEntries(keys.map((k) => [k, validValue(k)])), { requiredKeys: [] })
  const fields = fc.oneof(valid, fc.record(model), fc.record(model, { requiredKeys: [] }))
  const extras = fc.oneof(
    { weight: 3, arbitrary: fc.constant({}) },
    {
      weight: 1,
      arbitrary: fc.dictionary(
        fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom('nickname', 'state', 'created', 'organization_type', 'trace_id', 'constructor')),
        fc.jsonValue({ maxDepth: 2 }),
        { maxKeys: 3 },
      ),
    },
  )
  return fc.tuple(fields, extras, fc.nat(7)).map(([f, e, n]) => {
    const text = JSON.stringify({ ...e, ...f })
    // A literal "__proto__" key, which only raw JSON text can carry.
    return n === 0 ? text.replace(/^\{/, '{"__proto__":{"polluted":true,"state":"active"},') : text
  })
}

/** Any body at all, as the request's text (JSON or not). */
function bodyText(keys: string[]): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 5, arbitrary: schemaBody(keys) },
    { weight: 2, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
    { weight: 1, arbitrary: fc.constantFrom(...world.tokens, ...world.deadTokens).map((t) => JSON.stringify(t)) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        '',
        ' ',
        'null',
        'true',
        '0',
        '"text"',
        '[]',
        '{}',
        '{',
        '{"description":',
        '\ufeff{}',
        'NaN',
        '1e999',
        '{"a":1}{"b":2}',
        '{"description":"x","description":{"a":1}}',
        '{"__proto__":null}',
        '{"constructor":{"prototype":{"polluted":true}}}',
      ),
    },
  )
}

/** Bodies past the limits: too big (with and without content-length) or deeply nested. */
const SPECIAL_BODIES: Body[] = [
  { kind: 'text', text: JSON.stringify({ description: 'd'.repeat(LIMIT) }) },
  { kind: 'stream', text: JSON.stringify({ description: 'd'.repeat(LIMIT + 10) }) },
  { kind: 'text', text: `[${' '.repeat(LIMIT)}]` },
  { kind: 'text', text: '['.repeat(LIMIT - 10) },
  { kind: 'text', text: '['.repeat(100_000) },
  { kind: 'text', text: '['.repeat(LIMIT / 2 - 2) + ']'.repeat(LIMIT / 2 - 2) },
  { kind: 'text', text: '{"a":'.repeat(LIMIT / 6) + '1' + '}'.repeat(LIMIT / 6) },
  { kind: 'text', text: `{"description":${'['.repeat(30_000)}${']'.repeat(30_000)}}` },
  { kind: 'text', text: `{"allowed_environments":${'['.repeat(30_000)}${']'.repeat(30_000)},"description":"x"}` },
  { kind: 'text', text: JSON.stringify({ description: 'x', extra: Array.from({ length: 6000 }, (_, i) => i) }) },
  { kind: 'text', text: JSON.stringify(Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, i]))) },
]

/** Bytes that are not UTF-8: lone continuation bytes, overlongs, surrogates, truncations. */
const INVALID_UTF8: Body[] = [
  [0xff],
  [0xfe, 0xff],
  [0x7b, 0x22, 0x64, 0x22, 0x3a, 0x22, 0xc3, 0x22, 0x7d],
  [0xc0, 0xaf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0x7b, 0x22, 0x64, 0x65, 0x73, 0x63, 0x72, 0x69, 0x70, 0x74, 0x69, 0x6f, 0x6e, 0x22, 0x3a, 0x22, 0x80, 0x22, 0x7d],
  [0xef, 0xbb, 0xbf, 0x7b, 0x7d],
  [0x00, 0x00, 0x00, 0x7b],
].map((bytes) => ({ kind: 'bytes', bytes }))

function isJson(body: Body): boolean {
  try {
    const text = body.kind === 'bytes' ? new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(body.bytes)) : body.kind === 'none' ? '' : body.text
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

const CONTENT_TYPES = [
  null,
  'text/plain',
  'text/plain; charset=utf-8',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/json;charset=UTF-8',
  'APPLICATION/JSON',
  ' application/json ',
  'application/json;;;',
  'application/jsonx',
  'application/json-patch+json',
  'application/problem+json',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=xyz',
  'multipart/form-data',
  'application/octet-stream',
  '*/*',
  '',
  ';',
  'garbage',
]

const contentType = fc.oneof({ weight: 6, arbitrary: fc.constant<string | null>('application/json') }, { weight: 2, arbitrary: fc.constantFrom(...CONTENT_TYPES) })

// (Methods the fetch Request does not know, like FOO, become GET there: not worth sending.)
const ODD_METHODS = ['GET', 'HEAD', 'OPTIONS', 'PUT', 'TRACE', 'DELETE', 'PATCH', 'POST', 'PROPFIND', 'CONNECT', 'SEARCH']

/** An Authorization header, or none: valid tokens, dead tokens and malformed headers. */
function authorization(): fc.Arbitrary<string | null> {
  const live = fc.constantFrom(...world.tokens)
  const any = fc.oneof(live, fc.constantFrom(...world.deadTokens))
  return fc.oneof(
    { weight: 3, arbitrary: live.map((t) => `Bearer ${t}`) },
    { weight: 1, arbitrary: fc.constantFrom(...world.deadTokens).map((t) => `Bearer ${t}`) },
    {
      weight: 3,
      arbitrary: fc.tuple(any, fc.integer({ min: 0, max: 20 })).map(([t, form]) =>
        [
          `bearer ${t}`,
          `BEARER ${t}`,
          `Bearer  ${t}`,
          `Bearer\t${t}`,
          `Bearer ${t}   `,
          `Bearer ${t}junk`,
          `Bearer ${t} junk`,
          `Bearer ${t}.`,
          `Bearer ${t}, Bearer ${t}`,
          `Bearer "${t}"`,
          `Bearer${t}`,
          `Bearer: ${t}`,
          `Token ${t}`,
          `Basic ${t}`,
          t,
          `Bearer ${t}${'T'.repeat(16_000)}`,
          `Bearer ${t.toUpperCase()}`,
          `Bearer ${t.slice(0, -1)}`,
          `Bearer ${t.replace('kw2_', 'kw2__')}`,
          `Bearer ${t}\u00ff`,
          `Bearer ${encodeURIComponent(t)}=`,
        ][form]!,
      ),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        null,
        '',
        'Bearer',
        'Bearer ',
        'Basic x',
        `Basic ${Buffer.from('admin:admin').toString('base64')}`,
        `Bearer ${'T'.repeat(8000)}`,
        'Bearer kw1.',
        'Bearer kw1.e30.',
        'Bearer kw2_',
        'Bearer kw2__',
        'Bearer \u00ff\u00fe',
        'Negotiate abcdefghijklmnop',
      ),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 30 }).map((s) => `Bearer ${s.replace(/[^\t\x20-\x7e]/g, '')}`) },
  )
}

/** Query values: valid-looking, empty, negative, huge, non-numeric, unknown, odd encodings. */
const queryValue = fc.oneof(
  fc.constantFrom(
    '',
    '1',
    '2',
    '0',
    '-1',
    '1000',
    '1001',
    '999999999',
    '1000000000',
    '99999999999999999999999',
    '1e3',
    '0x10',
    '1.5',
    ' 1',
    '+1',
    'abc',
    'asc',
    'desc',
    'DESC',
    'random',
    'active',
    'suspended',
    'unregistered',
    'verified',
    'deleted',
    'exact',
    'contains',
    'startswith',
    'regex',
    'PROD',
    'prod',
    'null',
    '%00',
    '%zz',
    '%',
    ',',
    ',,,',
    '__proto__',
  ),
  fc.uuid(),
  fc.string({ maxLength: 20 }).map(encodeURIComponent),
)

function queryFor(route: Route): fc.Arbitrary<string> {
  const keys = [...route.queryKeys, 'page', 'page_size', 'order', 'state', 'unknown', '__proto__', 'constructor', '']
  const value = fc.oneof(
    { weight: 12, arbitrary: queryValue },
    { weight: 2, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.constantFrom(...world.tokens).map(encodeURIComponent) },
  )
  const pair = fc.tuple(fc.constantFrom(...keys), value, fc.boolean())
  const idKeys = keys.filter((k) => k.endsWith('_ids'))
  const idPair = idKeys.length ? fc.tuple(fc.constantFrom(...idKeys), fc.constantFrom(...ID_KINDS.flatMap((k) => world.ids[k]))) : fc.constant(null)
  return fc
    .tuple(fc.array(pair, { maxLength: 6 }), fc.array(idPair, { maxLength: 3 }))
    .map(([pairs, ids]) => {
      const parts = pairs.map(([k, v, repeat]) => {
        const one = v === null ? k : `${k}=${v}`
        return repeat ? `${one}&${one}` : one
      })
      for (const pair of ids) if (pair) parts.push(`${pair[0]}=${pair[1]}`)
      return parts.length ? `?${parts.join('&')}` : ''
    })
}

function headersOf(auth: string | null, type: string | null, extra: Record<string, string> = {}): Record<string, string> {
  return { ...extra, ...(auth !== null ? { authorization: auth } : {}), ...(type !== null ? { 'content-type': type } : {}) }
}

// ---------------------------------------------------------------------------------------------
// The properties.

let ROUTES: Route[]
beforeAll(async () => {
  ROUTES = await describedRoutes()
})

/**
 * Runs may suspend the tenants' organizations and applications (that is part of the fuzzing), but
 * then nearly every later request would be a 401: each run starts with them active again.
 */
async function reactivate(): Promise<void> {
  for (const id of world.ids.organization_id.slice(1, 5)) {
    if ((await h.storage.find('organizations', id))!.state === 'suspended') expect((await h.request('PATCH', `/api/organizations/${id}/activate`)).status).toBe(200)
  }
  for (const id of world.ids.application_id) {
    if ((await h.storage.find('applications', id))!.state === 'suspended') expect((await h.request('PATCH', `/api/applications/${id}/activate`)).status).toBe(200)
  }
}

async function holds<T extends [unknown, ...unknown[]]>(property: fc.IAsyncPropertyWithHooks<T>): Promise<void> {
  await fc.assert(property.beforeEach(async (previous) => {
    await reactivate()
    await previous()
  }), { seed: SEED, numRuns: RUNS, ...(PATH ? { path: PATH } : {}) })
  await stillAlive()
  expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  expect(({} as Record<string, unknown>).state).toBeUndefined()
}

const withBody = (method: string) => method !== 'GET' && method !== 'HEAD'

/** FUZZ_STATS=1 prints how often each route answered each status (to see what the runs reach). */
const stats = new Map<string, number>()
afterAll(() => {
  if (!process.env.FUZZ_STATS) return
  console.log([...stats].sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${String(n).padStart(6)} ${k}`).join('\n'))
})

async function exercise(req: Req): Promise<void> {
  const res = await send(req)
  if (process.env.FUZZ_STATS) {
    const code = res.status >= 400 ? /"code":"([a-z_]+)"/.exec(res.text)?.[1] ?? '' : ''
    const key = `${res.status} ${code} ${req.method} ${req.url.split('?')[0]!.replace(/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/g, ':id').slice(0, 60)}`
    stats.set(key, (stats.get(key) ?? 0) + 1)
  }
  checkInvariants(req, res)
  await stillAlive()
}

/** Any request to any route: mostly its own method, real tokens, schema-shaped bodies; anything else too. */
function anyRequest(): fc.Arbitrary<Req> {
  return fc
    .constantFrom(...ROUTES)
    .chain((route) =>
      fc.record({
        route: fc.constant(route),
        method: fc.oneof({ weight: 9, arbitrary: fc.constant(route.method) }, { weight: 1, arbitrary: fc.constantFrom(...ODD_METHODS) }),
        path: pathFor(route),
        query: fc.oneof({ weight: 4, arbitrary: fc.constant('') }, { weight: 1, arbitrary: queryFor(route) }),
        auth: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...world.tokens).map((t) => `Bearer ${t}`) }, { weight: 1, arbitrary: authorization() }),
        body: fc.oneof({ weight: 1, arbitrary: fc.constant(null) }, { weight: 6, arbitrary: bodyText(route.bodyKeys) }),
        type: contentType,
      }),
    )
    .map(
      (r): Req => ({
        method: r.method,
        url: r.path + r.query,
        headers: headersOf(r.auth, r.body === null ? null : r.type),
        body: r.body === null || !withBody(r.method) ? { kind: 'none' } : { kind: 'text', text: r.body },
      }),
    )
    .filter((req) => !carriesLeakMarkers(req))
}

/**
 * A request that gets deep: a real record of the right kind, a token that may reach it, a body
 * whose every field is accepted by itself, a sensible query; what varies is which records, tokens
 * and values meet (and the state earlier runs left behind).
 */
function wellFormedRequest(): fc.Arbitrary<Req> {
  const [vendorAdmin] = world.tokens
  const sensibleQuery = fc
    .array(
      fc.oneof(
        fc.integer({ min: 1, max: 3 }).map((n) => `page=${n}`),
        fc.integer({ min: 1, max: 1000 }).map((n) => `page_size=${n}`),
        fc.constantFrom('order=asc', 'order=desc', 'state=active', 'state=suspended', 'installation_desc_search_mode=contains', 'environment=prod'),
        fc.tuple(fc.constantFrom('organization_ids', 'consumer_ids', 'installation_ids', 'application_ids', 'enrollment_ids'), fc.constantFrom(...ID_KINDS.flatMap((k) => world.ids[k]))).map(([k, v]) => `${k}=${v}`),
      ),
      { maxLength: 4 },
    )
    .map((parts) => (parts.length ? `?${parts.join('&')}` : ''))
  return fc
    .constantFrom(...ROUTES.filter((r) => r.path.startsWith('/api/')))
    .chain((route) =>
      fc.record({
        route: fc.constant(route),
        params: fc.tuple(...route.params.map((name) => fc.constantFrom(...((world.ids as Record<string, string[]>)[name] ?? world.ids.organization_id)))),
        auth: fc.oneof({ weight: 3, arbitrary: fc.constant(vendorAdmin!) }, { weight: 2, arbitrary: fc.constantFrom(...world.tokens) }),
        body: fc.record(Object.fromEntries(route.bodyKeys.map((k) => [k, validValue(k)])), { requiredKeys: route.bodyKeys.filter((k) => k !== 'default') }),
        query: route.queryKeys.length ? sensibleQuery : fc.constant(''),
      }),
    )
    .map((r): Req => {
      let path = r.route.path
      r.route.params.forEach((name, i) => (path = path.replace(`:${name}`, r.params[i]!)))
      const hasBody = r.route.bodyKeys.length > 0
      return { method: r.route.method, url: path + r.query, headers: headersOf(`Bearer ${r.auth}`, hasBody ? 'application/json' : null), body: hasBody ? { kind: 'text', text: JSON.stringify(r.body) } : { kind: 'none' } }
    })
    .filter((req) => !carriesLeakMarkers(req))
}

describe(`fuzz (seed ${SEED}, ${RUNS} runs per property${PATH ? `, path ${PATH}` : ''})`, () => {
  test('the routes are read from the app: every /api route, each with its schema', () => {
    expect(ROUTES.length).toBeGreaterThan(30)
    expect(ROUTES.filter((r) => r.method === 'POST' && r.path.startsWith('/api/')).every((r) => r.bodyKeys.length > 0)).toBe(true)
    expect(ROUTES.filter((r) => r.queryKeys.length > 0).map((r) => r.path)).toContain('/api/consumers')
  })

  test(
    'any route, any path identifiers, any body: never a 5xx, always a clean problem',
    async () => {
      await holds(fc.asyncProperty(anyRequest(), exercise))
    },
    TEST_LIMIT_MS,
  )

  test(
    'well-formed requests on real records: the success paths hold the invariants too',
    async () => {
      await holds(fc.asyncProperty(wellFormedRequest(), exercise))
    },
    TEST_LIMIT_MS,
  )

  test(
    'bursts of concurrent requests: the same invariants, and no request stalls another',
    async () => {
      const mixed = fc.array(fc.oneof(anyRequest(), wellFormedRequest()), { minLength: 2, maxLength: 8 })
      // The same request several times at once: creations with one id, one transition, racing.
      const repeated = fc.tuple(wellFormedRequest(), fc.integer({ min: 2, max: 6 })).map(([req, n]) => Array.from({ length: n }, () => req))
      const burst = fc.oneof(mixed, repeated)
      await holds(
        fc.asyncProperty(burst, async (requests) => {
          const answers = await Promise.all(requests.map(send))
          requests.forEach((req, i) => checkInvariants(req, answers[i]!))
          await stillAlive()
        }),
      )
    },
    TEST_LIMIT_MS,
  )

  test(
    'huge, deeply nested and non-UTF-8 bodies under any content type',
    async () => {
      const request = fc
        .record({
          route: fc.constantFrom(...ROUTES.filter((r) => withBody(r.method))),
          auth: fc.constantFrom(...world.tokens),
          body: fc.constantFrom(...SPECIAL_BODIES, ...INVALID_UTF8),
          type: fc.oneof({ weight: 3, arbitrary: fc.constant<string | null>('application/json') }, { weight: 1, arbitrary: fc.constantFrom(...CONTENT_TYPES) }),
        })
        .chain((r) => pathFor(r.route).map((path): Req => ({ method: r.route.method, url: path, headers: headersOf(`Bearer ${r.auth}`, r.type), body: r.body })))
      await holds(fc.asyncProperty(request, exercise))
    },
    TEST_LIMIT_MS,
  )

  test(
    'odd query values on every route, lists above all',
    async () => {
      const lists = ROUTES.filter((r) => r.queryKeys.length > 0)
      const request = fc
        .oneof({ weight: 3, arbitrary: fc.constantFrom(...lists) }, { weight: 1, arbitrary: fc.constantFrom(...ROUTES) })
        .chain((route) =>
          fc.record({ route: fc.constant(route), path: pathFor(route), query: queryFor(route), auth: fc.constantFrom(...world.tokens) }),
        )
        .map((r): Req => ({ method: r.route.method, url: r.path + r.query, headers: headersOf(`Bearer ${r.auth}`, null), body: { kind: 'none' } }))
        .filter((req) => !carriesLeakMarkers(req))
      await holds(fc.asyncProperty(request, exercise))
    },
    TEST_LIMIT_MS,
  )

  test(
    'odd methods on known paths',
    async () => {
      const request = fc
        .record({
          route: fc.constantFrom(...ROUTES),
          method: fc.constantFrom(...ODD_METHODS),
          auth: fc.oneof(fc.constantFrom(...world.tokens).map((t) => `Bearer ${t}`), fc.constant(null)),
          body: fc.oneof(fc.constant(null), fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v))),
        })
        .chain((r) =>
          pathFor(r.route).map(
            (path): Req => ({
              method: r.method,
              url: path,
              headers: headersOf(r.auth, r.body === null ? null : 'application/json'),
              body: r.body === null || !withBody(r.method) ? { kind: 'none' } : { kind: 'text', text: r.body },
            }),
          ),
        )
        .filter((req) => !carriesLeakMarkers(req))
      await holds(fc.asyncProperty(request, exercise))
    },
    TEST_LIMIT_MS,
  )

  test(
    'odd Authorization headers: missing, malformed, dead, foreign and very long tokens',
    async () => {
      const request = fc
        .constantFrom(...ROUTES)
        .chain((route) =>
          fc.record({
            route: fc.constant(route),
            path: pathFor(route),
            auth: authorization(),
            body: fc.oneof(fc.constant(null), schemaBody(route.bodyKeys)),
            twice: fc.boolean(),
          }),
        )
        .map((r): Req => {
          const headers = headersOf(r.auth, r.body === null ? null : 'application/json')
          return { method: r.route.method, url: r.path, headers, body: r.body === null || !withBody(r.route.method) ? { kind: 'none' } : { kind: 'text', text: r.body } }
        })
        .filter((req) => !carriesLeakMarkers(req))
      await holds(fc.asyncProperty(request, exercise))
    },
    TEST_LIMIT_MS,
  )

  // Not random: the bodies that once made a 400 quote the token they carried.
  test('every route × a token where the body or a field should be: the error never echoes it', async () => {
    const token = world.tokens[4]!
    for (const route of ROUTES.filter((r) => withBody(r.method))) {
      const path = route.path.replace(/:([A-Za-z_]+)/g, (_, name: string) => ((world.ids as Record<string, string[]>)[name] ?? [h.vendorId])[0]!)
      const bodies = [JSON.stringify(token), ...route.bodyKeys.map((key) => JSON.stringify({ [key]: token })), JSON.stringify({ supported_environments: token, description: 'x' })]
      for (const text of bodies) {
        const req: Req = { method: route.method, url: path, headers: headersOf(`Bearer ${h.vendorToken}`, 'application/json'), body: { kind: 'text', text } }
        const res = await send(req)
        checkInvariants(req, res)
        if (res.status >= 400) expect({ req: show(req), echoed: res.text.includes(token) }).toEqual({ req: show(req), echoed: false })
      }
    }
  }, TEST_LIMIT_MS)

  // Not random: each route once with each kind of body past the limits, and the exact answer where
  // the contract's precedence makes it certain (401 first, then 413, then 415).
  test('every route × every oversized, nested, non-UTF-8 or non-JSON body', async () => {
    await reactivate()
    for (const route of ROUTES.filter((r) => withBody(r.method))) {
      // Customer A's records (A is enabled for environments): every route exists for them.
      const path = route.path.replace(/:([A-Za-z_]+)/g, (_, name: string) => (name === 'organization_id' ? world.ids.organization_id[1]! : (world.ids as Record<string, string[]>)[name]![0]!))
      const api = path.startsWith('/api/')
      for (const body of [...SPECIAL_BODIES, ...INVALID_UTF8]) {
        for (const [auth, type] of [
          [h.vendorToken, 'application/json'],
          [null, 'application/json'],
          [h.vendorToken, 'text/plain'],
          [h.vendorToken, 'multipart/form-data; boundary=x'],
          [h.vendorToken, null],
        ] as const) {
          const req: Req = { method: route.method, url: path, headers: headersOf(auth && `Bearer ${auth}`, type), body }
          const res = await send(req)
          checkInvariants(req, res)
          const size = body.kind === 'bytes' ? body.bytes.length : body.kind === 'none' ? 0 : Buffer.byteLength(body.text)
          if (api && auth === null) expect({ req: show(req), status: res.status }).toEqual({ req: show(req), status: 401 })
          else if (api && size > LIMIT) expect({ req: show(req), status: res.status }).toEqual({ req: show(req), status: 413 })
          else if (api && type !== 'application/json') expect({ req: show(req), status: res.status }).toEqual({ req: show(req), status: 415 })
          // Bytes that are not JSON are a 400 on every route, those that take no body included.
          else if (api && !isJson(body)) expect({ req: show(req), status: res.status }).toEqual({ req: show(req), status: 400 })
        }
      }
    }
    await stillAlive()
  }, TEST_LIMIT_MS)
})
