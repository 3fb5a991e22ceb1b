/**
 * Every request's line in the log and its count and duration in the metrics (docs/operations.md),
 * including those no route answers, 401s and 429s.
 *
 * Observed around Elysia's handler of each route (`app.wrap`), which sees the final Response of
 * every request, not in a lifecycle hook: a global onRequest hook costs the read by id more than the
 * read itself (docs/performance.md "What earlier changes won"), and onAfterResponse schedules a
 * task per request and is given the handler's value, not the Response it became. Bun's router
 * calls one handler per route, so the route's template is found once per handler; requests that
 * reach Elysia's own router (no route matched, or `app.handle` in tests) are matched here, per
 * request. The cost: docs/operations.md.
 */
import type { Logger, RequestLineWriter } from '../ops/logger'
import type { Metrics, RouteSeries } from '../ops/metrics'
import type { Principal } from '../modules/shared/principal'
import { pathOf, pathStartOf } from './request-url'

type Handler = (request: Request) => Response | Promise<Response>

/**
 * What is noted of an authenticated request for its log line: its token, its trace id and the
 * bytes of its JSON answer (-1 until known). Reading them back from the Response's headers cost a
 * read by id about 6% of its CPU (Bun makes the Headers object on first use); requests with no
 * note (no valid token) and answers with none (problems, documents) have their headers read.
 */
interface RequestNote {
  readonly principal: Principal
  readonly traceId: string
  bytesOut: number
}
const notes = new WeakMap<Request, RequestNote>()

/**
 * The request whose handler is running now, and its note. A request answered synchronously (a read
 * on the embedded storage) is noted and answered with no other request in between: its note needs
 * no WeakMap entry. One answered later has its note moved to the WeakMap when its handler returns.
 */
let inHand: Request | undefined
let inHandNote: RequestNote | undefined

const noteOf = (request: Request): RequestNote | undefined => (request === inHand ? inHandNote : notes.get(request))

/** Noted by `authenticated` (src/http/context.ts). */
export function noteAuthenticated(request: Request, principal: Principal, traceId: string): void {
  const note = { principal, traceId, bytesOut: -1 }
  if (request === inHand) inHandNote = note
  else notes.set(request, note)
}

/**
 * Noted as a JSON answer's Response is made (`jsonResponse`, foundation.ts): the length of its body,
 * taken for a successful answer. False when the request has no note (no valid token).
 */
export function noteBytesOut(request: Request, bytes: number): boolean {
  const note = noteOf(request)
  if (note === undefined) return false
  note.bytesOut = bytes
  return true
}

export const UNMATCHED_ROUTE = 'unmatched'

interface RouteObserver {
  readonly series: RouteSeries
  readonly line: RequestLineWriter
}

export interface Route {
  readonly method: string
  readonly path: string
}

/**
 * Whether a parameter Bun's router gave is a dot segment (`.` or `..`, also sent as `%2e`). Bun
 * routes the path as sent, and then gives the request its URL with dot segments resolved: the
 * route it matched is then not the one the URL's path names (docs/api.md "Conventions").
 */
const hasDotSegment = (params: Record<string, string>) => Object.values(params).some((value) => value === '.' || value === '..')

/**
 * The template of the route Bun matched for a path sent with a dot segment as a parameter: the
 * one of `method` whose template, given the request's parameters and resolved as the URL was,
 * is the request's path (`PATCH /api/installations/./verify` reads back as
 * `/api/installations/verify`: the verify route's, not the update's).
 */
function sentTemplate(routes: readonly Route[], method: string, params: Record<string, string>, path: string): string {
  const routeMethod = method === 'HEAD' ? 'GET' : method
  const names = (template: string) => [...template.matchAll(/:([^/]+)/g)].map((match) => match[1]!)
  const given = Object.keys(params).sort().join()
  for (const route of routes) {
    if (route.method !== routeMethod || names(route.path).sort().join() !== given) continue
    const sent = route.path.replace(/:([^/]+)/g, (_, name: string) => params[name]!)
    if (new URL(sent, 'http://keyward.invalid').pathname === path) return route.path
  }
  return UNMATCHED_ROUTE
}

/** Finds a request's route template among `routes` (Elysia's `:name` parameters); a HEAD is its GET route's. */
function routeMatcher(routes: readonly Route[]): (method: string, path: string) => string {
  const patterns = routes.map((route) => ({
    method: route.method,
    path: route.path,
    // Exactly, as the routes match (strictPath, src/app.ts): a trailing slash is an unknown route.
    pattern: new RegExp(`^${route.path.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/:[^/]+/g, '[^/]+')}$`),
  }))
  return (method, path) => {
    const routeMethod = method === 'HEAD' ? 'GET' : method
    return patterns.find((p) => (p.method === routeMethod || p.method === 'ALL') && p.pattern.test(path))?.path ?? UNMATCHED_ROUTE
  }
}

/** The requests `forElysiaRouter` made, and the ones Bun was sent (whose socket they came by). */
const sentRequests = new WeakMap<Request, Request>()

/** The request as Bun was sent it: Bun's server knows the client's address of that one only. */
export const sentRequestOf = (request: Request): Request => sentRequests.get(request) ?? request

/**
 * Elysia's router reads a URL's path from its 12th character on (`url.indexOf('/', 11)`), as if
 * every host were 4 characters or more: with a shorter Host (`api`, as a proxy may send it) it
 * dropped the path's first segment, and `/anything/api/tokens` ran the `/api/tokens` route. A
 * request whose path starts earlier is handed to it with the URL's host replaced: no route reads
 * the host (application `host_url`s come from `--public-url`). Only requests that Bun's router
 * matched to no route (or `app.handle`'s) go through Elysia's.
 */
function forElysiaRouter(request: Request): Request {
  const url = request.url
  const pathStart = pathStartOf(url)
  if (pathStart >= 11) return request
  // A request without a Host (HTTP/1.0, or an empty one) has a URL that is only its path.
  const scheme = pathStart === 0 ? 'http://' : url.slice(0, url.indexOf('//') + 2)
  const rewritten = new Request(`${scheme}keyward.invalid${url.slice(pathStart)}`, request)
  sentRequests.set(rewritten, request)
  return rewritten
}

/**
 * Bun sends no `Date` header with the answer to a HEAD request (it does with every other), which an
 * origin server must send (RFC 9110, section 6.6.1): given here. HEAD requests are few.
 */
function withDate(handler: Handler): Handler {
  const dated = (response: Response) => {
    if (!response.headers.has('date')) response.headers.set('date', new Date().toUTCString())
    return response
  }
  return (request) => {
    const response = handler(request)
    return response instanceof Promise ? response.then(dated) : dated(response)
  }
}

/**
 * The function for `app.wrap`: given a route's handler and a request, the handler to call, which
 * records the request once it is answered. `routes` is read on first use (the app's routes, once built).
 */
export function requestObserver(routes: () => readonly Route[], logger: Logger, metrics: Metrics) {
  let match: ((method: string, path: string) => string) | undefined
  /** Params from Bun's router, unless it was Elysia's that routed the request (no route matched, or `app.handle`). */
  const paramsOf = (request: Request) => (request as { params?: Record<string, string> }).params
  const templateOf = (request: Request) => {
    const params = paramsOf(request)
    if (params !== undefined && hasDotSegment(params)) return sentTemplate(routes(), request.method, params, pathOf(request.url))
    return (match ??= routeMatcher(routes()))(request.method, pathOf(request.url))
  }
  /** Where the requests of `method` to `route` are counted and logged. */
  const routeObserver = (method: string, route: string): RouteObserver => ({ series: metrics.series(route, method), line: logger.requests(method, route) })

  /**
   * Records `response`. Its length is the one noted, or its Content-Length, which every answer
   * keyward builds carries (JSON answers, problems, the pages and documents): a body is never read
   * or copied to measure it (a copy of the 4 MiB docs script per request, unread by a slow client,
   * held gigabytes). A noted length is only taken for a success: an answer that failed after it was
   * built (a write it saw could not be made durable) is a problem of its own length. A HEAD sends no body.
   */
  const answered = (request: Request, response: Response, observer: RouteObserver, started: number, note: RequestNote | undefined) => {
    const seconds = (performance.now() - started) / 1000
    const status = response.status
    observer.series.observe(status, seconds)
    const traceId = note !== undefined ? note.traceId : (response.headers.get('x-trace-id') ?? undefined)
    const bytesOut =
      request.method === 'HEAD' ? 0 : note !== undefined && note.bytesOut >= 0 && status < 400 ? note.bytesOut : Number(response.headers.get('content-length') ?? 0)
    observer.line(status, Math.round(seconds * 1e6) / 1000, traceId, note?.principal.organization.organization_id, note?.principal.tokenId, bytesOut)
  }

  /**
   * `known`: the observer of the one route `handler` answers; else the request's route is matched
   * per request. `elysiaRouter`: `handler` is Elysia's router (it finds the route itself), given
   * each request with a path it reads right (`forElysiaRouter`).
   */
  const observe = (handler: Handler, known: RouteObserver | undefined, elysiaRouter = false): Handler => {
    return (sent) => {
      const request = elysiaRouter ? forElysiaRouter(sent) : sent
      const started = performance.now()
      const observer = known ?? routeObserver(request.method, templateOf(request))
      inHand = request
      inHandNote = undefined
      const response = handler(request)
      if (response instanceof Promise) {
        if (inHand === request && inHandNote !== undefined) notes.set(request, inHandNote)
        inHand = undefined
        return response.then((answer) => (answered(request, answer, observer, started, notes.get(request)), answer))
      }
      const note = noteOf(request)
      inHand = undefined
      answered(request, response, observer, started, note)
      return response
    }
  }

  const byHandler = new Map<Handler, Handler>()
  /** HEAD requests, which Bun's router hands to the GET route's handler: matched per request (they are few). */
  const headByHandler = new Map<Handler, Handler>()
  let general: Handler | undefined
  return (handler: Handler, request: Request): Handler => {
    if (request.method === 'HEAD') {
      let head = headByHandler.get(handler)
      // Elysia's router (`params` unset, as below) gets a path it reads right, for HEAD too.
      const viaElysiaRouter = paramsOf(request) === undefined
      if (!head) headByHandler.set(handler, (head = withDate(observe(handler, undefined, viaElysiaRouter))))
      return head
    }
    const observed = byHandler.get(handler)
    if (observed) return observed
    // Bun's router gives the requests of its routes `params`; Elysia's router (no route matched,
    // or `app.handle`) handles every route with one handler: matched per request.
    const params = paramsOf(request)
    if (params === undefined) return (general ??= observe(handler, undefined, true))
    const template = templateOf(request)
    // Bun routes the path as sent, but `request.url` reads it resolved: `/api/organizations/.`
    // reaches the `:organization_id` route (a 400) and reads back as `/api/organizations/`, and
    // `/api/installations/./verify` as the update's path (`sentTemplate`). Such a request is
    // observed alone, and the handler waits for a request that names its route plainly: learnt from
    // one with a dot segment, it labelled every later verify as an update (found in review, 2026-11-30).
    if (template === UNMATCHED_ROUTE || hasDotSegment(params)) return observe(handler, routeObserver(request.method, template))
    const wrapped = observe(handler, routeObserver(request.method, template))
    byHandler.set(handler, wrapped)
    return wrapped
  }
}
