/**
 * What every controller needs: the storage, token verification, settings; the `authenticated`
 * plugin that every /api route goes through (401), and `takesBody` for the routes that read a body
 * (then 413 and 415): the order of docs/api.md "Status codes and errors", and no body is read for a request without a valid token.
 */
import { Elysia } from 'elysia'
import { then, type Maybe, type StateMark, type Storage } from '../storage/storage'
import { mapInTurns, type Slice } from '../ops/turns'
import type { TokenVerifier } from '../auth/tokens'
import { authenticate } from './auth'
import { tenantOf, type Principal } from '../modules/shared/principal'
import { readBody, type RequestBody } from './body'
import { failureAnswer, jsonAnswer, withTraceId } from './foundation'
import { BYTES_IN_TURNS_ABOVE_CHARS, JsonBytes } from './json-bytes'
import type { ViewText } from '../modules/shared/model'
import type { Actor } from '../modules/shared/audit'
import type { Logger } from '../ops/logger'
import type { Metrics } from '../ops/metrics'
import type { RateLimiter } from '../ops/rate-limit'
import { rateLimits, type ChargeRequest } from './rate-limits'
import { noteAuthenticated } from './observe'

export interface AppConfig {
  /** host_url handed out with a new application. */
  readonly publicUrl: string
  /** New installations start `verified` instead of `unregistered`. */
  readonly autoVerifyInstallations: boolean
  /** Origins whose pages may call the API from a browser (src/http/cors.ts); none by default. */
  readonly corsOrigins?: readonly string[]
}

/** What `createApp` is given. */
export interface AppOptions {
  readonly storage: Storage
  readonly verifier: TokenVerifier
  readonly config: AppConfig
  /** The server's log (src/ops/logger.ts); createApp gives one that writes JSON to stderr when absent. */
  readonly logger?: Logger
  /** GET /metrics' series; createApp makes them when absent. */
  readonly metrics?: Metrics
  /** Requests per second per token or client address (`--rate-limit`); absent or null: no limits. */
  readonly rateLimiter?: RateLimiter | null
  /**
   * The address a request came from, for the limits of requests without a valid token. `serve`
   * asks Bun's server; `app.handle` has no socket, and tests give their own.
   */
  readonly clientAddress?: (request: Request) => string
}

/** What every controller is given: AppOptions as createApp completes them. */
export interface AppDeps extends AppOptions {
  readonly logger: Logger
  readonly metrics: Metrics
  readonly clientAddress: (request: Request) => string
}

interface Authenticated {
  readonly principal: Principal
  /** Declared here for the handlers' types; `takesBody` reads it after this hook. */
  readonly body: RequestBody | undefined
}

function authenticateRequest(deps: AppDeps, charge: ChargeRequest | undefined, request: Request, set: { headers: Record<string, unknown> }): Maybe<Authenticated> {
  const traceId = withTraceId(set)
  const accepted = (principal: Principal): Authenticated => {
    noteAuthenticated(request, principal, traceId)
    deps.storage.actFor?.(tenantOf(principal))
    if (charge) charge(principal.tokenId, set)
    return { principal, body: undefined }
  }
  // `request.headers.get`, not the `headers` context: asking Elysia for `headers` makes it copy every
  // request header into a plain object on every request.
  const authorization = request.headers.get('authorization') ?? undefined
  if (!charge) return then(authenticate(deps.storage, deps.verifier, authorization), accepted)
  // Without a verified token, the client's address pays: a 401 while it has requests left, then 429.
  // So does a token that could not be checked (the database is down: a 503), so that a flood of
  // made-up tokens is limited then too, and its answers carry the RateLimit headers.
  const refused = (error: unknown): never => {
    charge(addressKey(deps, request), set)
    throw error
  }
  let principal: Maybe<Principal>
  try {
    principal = authenticate(deps.storage, deps.verifier, authorization)
  } catch (error) {
    return refused(error)
  }
  return principal instanceof Promise ? principal.then(accepted, refused) : accepted(principal)
}

/** Charges a request to its client's address (`addressCharge`): sets the RateLimit headers, or throws the 429. */
export type ChargeAddress = (request: Request, set: { headers: Record<string, unknown> }) => void

/**
 * Charges a request that no checked token pays for to its client's address, like a request without
 * a valid token (docs/operations.md), so that its answer carries the RateLimit headers: a request
 * no route answers, whatever its path (`/api`, `/API/...`, `/nothing`); one for the documents
 * (`/docs`, its script, `/openapi.json`: public, and costlier than a probe); a CORS preflight. The
 * probes (`/healthz`, `/readyz`) are not limited: a load balancer must always get its answer.
 * Charges nothing when there are no limits.
 */
export function addressCharge(deps: AppDeps): ChargeAddress {
  if (!deps.rateLimiter) return () => {}
  const charge = rateLimits(deps.rateLimiter)
  return (request, set) => charge(addressKey(deps, request), set)
}

/** The rate-limit bucket of a request that no valid token pays for: its client's address. */
const addressKey = (deps: AppDeps, request: Request) => `address ${deps.clientAddress(request)}`

/**
 * Elysia decides from a hook's source text whether to await it. The embedded storage answers
 * synchronously, and an awaited hook would make every request async: so it gets a hook written
 * without a call in its return (docs/storage.md, "What each implementation promises").
 */
export const authenticated = (deps: AppDeps) => {
  const charge = deps.rateLimiter ? rateLimits(deps.rateLimiter) : undefined
  return deps.storage.synchronous
    ? new Elysia().derive({ as: 'scoped' }, ({ request, set }) => {
        const resolved = authenticateRequest(deps, charge, request, set) as Authenticated
        return { principal: resolved.principal, body: resolved.body }
      })
    : new Elysia().derive({ as: 'scoped' }, async ({ request, set }) => {
        const resolved = await authenticateRequest(deps, charge, request, set)
        return { principal: resolved.principal, body: resolved.body }
      })
}

/**
 * Route options of every route that takes a body (`{ ...takesBody, detail: ... }`). Elysia must not
 * parse the body itself ('none'): it would do so before any hook, before the token is checked. The
 * transform runs after `authenticated` (a route's own hooks come after its plugins'). Only these
 * routes get it: any parse hook would make Elysia compile GET routes async too
 * (docs/performance.md "The read by id, 2026-11-28").
 */
export const takesBody = {
  parse: 'none' as const,
  transform: async (context: { request: Request; body: unknown }) => {
    context.body = await readBody(context.request)
  },
}

/** The trace id `authenticated` put on this response (same value in header and body). */
export const traceIdOf = (set: { headers: Record<string, unknown> }) => set.headers['x-trace-id'] as string

/**
 * A read's answer, `{"<name>": <the record's view>, "trace_id": "..."}`, spliced from the view's
 * remembered text (`rememberedView`, modules/shared/model.ts) and sent as it is; typed as the JSON
 * it is, for the typed client. A string answer is made into its Response by foundation's
 * mapResponse hook, or by `readRoutes` once settled.
 */
export function recordAnswer<K extends string, V>(set: ReadContext['set'], name: K, view: ViewText<V>): { [P in K]: V } & { trace_id: string } {
  const text = `{"${name}":${view},"trace_id":"${traceIdOf(set)}"}`
  return text as unknown as { [P in K]: V } & { trace_id: string }
}

/**
 * A list's answer, `{"<name>": [<each item's view>], ...rest}` (`rest` in its order: `total`,
 * `page`, `page_size` or a `trace_id`), spliced from the views' texts (`textOf`: remembered ones,
 * `rememberedView`) like `recordAnswer`. Made in turns of the event loop when it is big
 * (`mapInTurns`), in the request's `slice` (`sliceOf`), which its page's walk may have begun.
 */
export function listAnswer<K extends string, T, V, R extends Record<string, unknown>>(
  name: K,
  items: readonly T[],
  textOf: (item: T) => ViewText<V>,
  rest: R,
  slice: Slice,
): Maybe<{ [P in K]: V[] } & R> {
  const fields = JSON.stringify(rest)
  type Answer = { [P in K]: V[] } & R
  // One slice for the texts and the bytes: the bytes start within what the texts left of it.
  return then(mapInTurns(items, textOf, slice), (views): Maybe<Answer> => {
    const head = `{"${name}":[`
    const tail = `]${fields.length > 2 ? `,${fields.slice(1)}` : '}'}`
    let chars = head.length + tail.length + views.length
    for (const view of views) chars += view.length
    // Megabytes of records (long escaped descriptions) are written as bytes in turns (src/http/json-bytes.ts).
    if (chars > BYTES_IN_TURNS_ABOVE_CHARS) return JsonBytes.of(head, views, tail, slice) as unknown as Maybe<Answer>
    return `${head}${views.join(',')}${tail}` as unknown as Answer
  })
}

/**
 * The fields after a paged list's records (consumers, enrollments, tokens, audit events; docs/api.md
 * "Lists and paging"): `total`, `page` only when the request sent one, `page_size`; no trace_id.
 */
export const pagingFields = (q: { readonly page?: number | undefined; readonly page_size: number }, total: number) => ({
  total,
  ...(q.page ? { page: q.page } : {}),
  page_size: q.page_size,
})

/** Who makes a request's changes, for their audit events: the token, and the request's trace id. */
export const actorOf = (principal: Principal, set: { headers: Record<string, unknown> }): Actor => ({ principal, traceId: traceIdOf(set) })

/** What a read route's handler is given. */
export interface ReadContext {
  readonly principal: Principal
  readonly params: Record<string, string>
  readonly request: Request
  readonly set: { headers: Record<string, unknown> }
}

/**
 * Handlers of read routes: `read`'s answer, held back until everything it may have seen is durable
 * (no response shows a write that could still fail; free when nothing is in flight).
 *
 * Elysia decides from a handler's source text whether to await it (a call right after `return` or
 * `=>`, or the words async and await, make it async), and an awaited handler costs every read about
 * a microsecond on the wire. With the embedded storage a read answers synchronously, so the handler
 * below is written without those patterns. An answer that is a promise after all (a read waiting for
 * a write's fsync, a long list walk) has its failure turned into the problem response here, because
 * Elysia's error hook never sees the rejection of a handler it compiled as synchronous.
 */
export function readRoutes(deps: AppDeps) {
  const { storage } = deps
  // A read that failed after it yielded: answered as the error hook answers (a refusal once what it read is durable).
  const failed = (set: ReadContext['set'], since: StateMark) => (error: unknown) => failureAnswer(error, undefined, set, deps, (value, mark) => storage.settle(value, mark), since)
  /**
   * `settle` for a request that began to read at `since` (its principal's mark: `StateMark`), which
   * may show `customerId`'s data alone (null: the vendor's, any): it waits for no other tenant's writes.
   */
  const settleSince = (since: StateMark, customerId: string | null) => <T>(answer: T) => storage.settle(answer, since, customerId)
  return <R>(read: (context: ReadContext) => Maybe<R>) => {
    if (!storage.synchronous) {
      return async ({ principal, params, request, set }: ReadContext): Promise<R> => await then(read({ principal, params, request, set }), settleSince(principal.since, principal.customerId))
    }
    // An answer that had to wait is made into its Response here, as foundation's mapResponse hook
    // makes the others: Elysia maps a promise's value itself, without the hook.
    const answered = (request: Request, set: ReadContext['set']) => (value: unknown) => jsonAnswer(request, set, value) ?? value
    return ({ principal, params, request, set }: ReadContext): Maybe<R> => {
      let answer: Maybe<R>
      answer = read({ principal, params, request, set })
      // Settled as it is when it came synchronously (the read by id): no function made per request.
      if (answer instanceof Promise) answer = answer.then(settleSince(principal.since, principal.customerId))
      else answer = storage.settle(answer, principal.since, principal.customerId)
      if (answer instanceof Promise) answer = answer.then(answered(request, set), failed(set, principal.since)) as Promise<R>
      return answer
    }
  }
}
