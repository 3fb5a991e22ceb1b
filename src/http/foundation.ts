/**
 * App-wide plumbing: a trace id on every error response, and RFC 9457 problem bodies for every
 * failure, including the framework's own (unknown route, parse, validation). Bodies are read per
 * route, after the token is checked (`takesBody` in context.ts).
 */
import { Elysia } from 'elysia'
import { problemResponse } from './errors'
import { ApiError } from '../modules/shared/errors'
import { StorageUnavailableError } from '../store/wal'
import { DatabaseUnavailableError } from '../storage/postgres/errors'
import type { Logger } from '../ops/logger'
import type { Metrics } from '../ops/metrics'
import { RATE_LIMIT_HEADERS, RateLimited } from './rate-limits'
import { noteBytesOut } from './observe'
import { JsonBytes } from './json-bytes'
import type { ChargeAddress } from './context'
import type { Principal } from '../modules/shared/principal'
import type { StateMark } from '../storage/storage'

export const newTraceId = () => crypto.randomUUID()

/** Where a failure is told: the log, and for a 503 the metrics' count by reason (docs/operations.md, "Metrics"). */
export interface FailureReport {
  readonly logger: Logger
  readonly metrics: Metrics
}

/**
 * Gives the response its `x-trace-id` and returns it. Every route calls it first (the /api routes
 * through `authenticated`): per route rather than in an onRequest hook, because a global hook costs
 * every request about 1 µs more CPU (docs/performance.md, "What earlier changes won").
 */
export function withTraceId(set: { headers: Record<string, unknown> }): string {
  const traceId = newTraceId()
  set.headers['x-trace-id'] = traceId
  return traceId
}

/**
 * The problem response for anything thrown while answering a request: an ApiError as it says, a
 * storage failure as 503, the framework's own failures, and anything else as a logged 500.
 */
export function problemFor(error: unknown, code: string | number | undefined, set: { headers: Record<string, unknown> }, report: FailureReport): Response {
  // Routes that got this far set one (see `withTraceId`); an unknown route or a parse failure did not.
  const traceId = (set.headers['x-trace-id'] as string | undefined) ?? newTraceId()
  if (error instanceof ApiError) return problemResponse(error.status, error.code, error.detail, traceId, error.errors, limitHeaders(error, set))
  if (error instanceof StorageUnavailableError) {
    report.logger.error('storage failure', { trace_id: traceId, error: error.message })
    report.metrics.countUnavailable('storage_write_failed')
    return problemResponse(503, 'storage_unavailable', 'The change could not be written to disk and was not made.', traceId, undefined, limitHeaders(error, set))
  }
  if (error instanceof DatabaseUnavailableError) {
    report.logger.error('database unavailable', { trace_id: traceId, error: error.message })
    report.metrics.countUnavailable(error.reason)
    return problemResponse(
      503,
      'database_unavailable',
      'The database cannot serve this now; try again shortly (a change in flight may or may not have been made).',
      traceId,
      undefined,
      limitHeaders(error, set),
    )
  }
  if (code === 'NOT_FOUND') return problemResponse(404, 'not_found', 'There is no such route.', traceId, undefined, limitHeaders(error, set))
  if (code === 'PARSE') return problemResponse(400, 'invalid_json', 'The request body could not be parsed.', traceId)
  if (code === 'VALIDATION') return problemResponse(400, 'validation_failed', 'The request is not valid.', traceId, undefined, limitHeaders(error, set))
  report.logger.error('unexpected error', { trace_id: traceId, code: code === undefined ? undefined : String(code), error: (error as Error)?.stack ?? String(error) })
  return problemResponse(500, 'internal_error', 'An unexpected error occurred; it was logged with this trace id.', traceId, undefined, limitHeaders(error, set))
}

type Settle = <T>(value: T, since?: StateMark) => T | Promise<T>

/**
 * A refusal (a 4xx of keyward's rules) may rest on a change that is applied in memory but not yet
 * durable: another request's new consumer makes this one's id taken (409), a revocation makes this
 * token 401. Like a read (`readRoutes` in context.ts), it is answered once what it saw is durable;
 * if that change fails instead, the refusal is withdrawn for the 503 the change got, since what it
 * rested on never happened (docs/storage.md "What each implementation promises"). Free when
 * nothing waits for an fsync.
 */
function refusalOnceDurable(problem: Response, settle: Settle, since: StateMark | undefined, set: { headers: Record<string, unknown> }, report: FailureReport): Response | Promise<Response> {
  const settled = settle(problem, since)
  return settled instanceof Promise ? settled.catch((error: unknown) => problemFor(error, undefined, set, report)) : settled
}

/**
 * The problem response of a failure (`problemFor`); a refusal's once what it rested on is durable
 * (`refusalOnceDurable`), for a request that began to read at `since`.
 */
export function failureAnswer(
  error: unknown,
  code: string | number | undefined,
  set: { headers: Record<string, unknown> },
  report: FailureReport,
  settle: Settle,
  since: StateMark | undefined,
): Response | Promise<Response> {
  const answer = problemFor(error, code, set, report)
  return error instanceof ApiError && !(error instanceof RateLimited) ? refusalOnceDurable(answer, settle, since, set, report) : answer
}

/** The rate-limit headers `authenticated` set (every /api answer has them), and Retry-After on a 429. */
function limitHeaders(error: unknown, set: { headers: Record<string, unknown> }): Record<string, string> | undefined {
  if (set.headers['ratelimit'] === undefined) return undefined
  const headers: Record<string, string> = {}
  for (const name of RATE_LIMIT_HEADERS) headers[name] = set.headers[name] as string
  if (error instanceof RateLimited) headers['retry-after'] = String(error.retryAfterSeconds)
  return headers
}

/**
 * `settle`: the storage's (`Storage.settle`), for refusals that may rest on a change not durable
 * yet. `chargeUnmatched`: the rate limit of a request no route answers (`addressCharge` in
 * context.ts); it sets the RateLimit headers, or throws the 429 answered instead of the 404.
 */
export const foundation = (report: FailureReport, settle: Settle, chargeUnmatched: ChargeAddress) =>
  new Elysia({ name: 'foundation' })
    .onError({ as: 'global' }, (context) => {
      const { code, error, request, set } = context
      // The request's mark, once its token was checked (`authenticated`): a refusal made after it rests on what it read since.
      const since = (context as { principal?: Principal }).principal?.since
      if (code === 'NOT_FOUND') {
        try {
          chargeUnmatched(request, set)
        } catch (limited) {
          return problemFor(limited, undefined, set, report)
        }
      }
      let answer: Response | Promise<Response>
      answer = failureAnswer(error, code, set, report, settle, since)
      return answer
    })
    // JSON answers are serialised and made into their Response here rather than by Elysia: so that
    // their size is known for the request log's bytes_out (src/http/observe.ts), and their headers
    // cost less (`jsonResponse`).
    .mapResponse({ as: 'global' }, ({ request, responseValue, set }) => {
      // Assigned, then returned: a hook whose source text returns a call makes Elysia compile every
      // route to wait on a promise (see `readRoutes` in context.ts).
      let response: Response | undefined
      response = jsonAnswer(request, set, responseValue)
      return response
    })

/**
 * The Response of a JSON answer: a string is a JSON text already (`recordAnswer`, `listAnswer`), an
 * object is serialised. Undefined for anything else: a Response, or a promise (a read that waits for
 * a write's fsync, or a long walk: `readRoutes` makes its Response once it is settled).
 */
export function jsonAnswer(request: Request, set: AnswerSet, value: unknown): Response | undefined {
  if (typeof value === 'string' || value instanceof JsonBytes) return jsonResponse(request, set, value)
  if (typeof value !== 'object' || value === null || value instanceof Response || value instanceof Promise) return undefined
  return jsonResponse(request, set, JSON.stringify(value))
}

/** What a JSON answer's Response is made with: Elysia's `set` of the request. */
export interface AnswerSet {
  headers: Record<string, unknown>
  status?: number | string
}

/** Every JSON answer's Content-Type: copied into each Response natively, cheaper than set from an object. */
const JSON_HEADERS = new Headers({ 'content-type': 'application/json;charset=utf-8' })

/**
 * The Response of the JSON text `text`, with the status and headers in `set` (the trace id, the
 * RateLimit headers, CORS). Bun turns a plain object's headers into a Response's at some 100 ns
 * each, which is what Elysia would do with `set`; starting from a Headers object and setting only
 * the headers that vary costs a read by id up to 3% less CPU (docs/operations.md, "What it
 * costs"). `set` is emptied (no headers, status 200), so that Elysia hands this Response on as it
 * is instead of making it again with `set` merged in. The body's length is noted for the
 * request log, or, for a request without a note, sent as Content-Length for it to read (observe.ts).
 */
export function jsonResponse(request: Request, set: AnswerSet, text: string | JsonBytes): Response {
  const body = text instanceof JsonBytes ? text.bytes : text
  const response = new Response(body, { status: typeof set.status === 'number' ? set.status : 200, headers: JSON_HEADERS })
  const headers = response.headers
  for (const name in set.headers) headers.set(name, String(set.headers[name]))
  const bytes = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength
  if (!noteBytesOut(request, bytes)) headers.set('content-length', String(bytes))
  set.headers = {}
  set.status = 200
  return response
}
