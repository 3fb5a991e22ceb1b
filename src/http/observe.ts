/**
 * Every request's line in the log and its count and duration in the metrics (CONTRACT section 11;
 * docs/operations.md), including those no route answers, 401s and 429s.
 *
 * Observed around Elysia's handler of each route (`app.wrap`), which sees the final Response of
 * every request, not in a lifecycle hook: a global onRequest hook costs the read by id more than the
 * read itself (README "Performance"), and onAfterResponse schedules a task per request and is given
 * the handler's value, not the Response it became. Bun's router calls one handler per route, so the
 * route's template is found once per handler; requests that reach Elysia's own router (no route
 * matched, or `app.handle` in tests) are matched here, per request. The cost: docs/operations.md.
 */
import type { Logger } from '../ops/logger'
import type { Metrics, RouteSeries } from '../ops/metrics'
import type { Principal } from './auth'

type Handler = (request: Request) => Response | Promise<Response>

/** The token behind a request, noted by `authenticated` for the request's log line. */
const principals = new WeakMap<Request, Principal>()
export const notePrincipal = (request: Request, principal: Principal) => void principals.set(request, principal)

export const UNMATCHED_ROUTE = 'unmatched'

export interface Route {
  readonly method: string
  readonly path: string
}

/** Finds a request's route template among `routes` (Elysia's `:name` parameters); a HEAD is its GET route's. */
function routeMatcher(routes: readonly Route[]): (method: string, path: string) => string {
  const patterns = routes.map((route) => ({
    method: route.method,
    path: route.path,
    pattern: new RegExp(`^${route.path.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/:[^/]+/g, '[^/]+')}/?$`),
  }))
  return (method, path) => {
    const routeMethod = method === 'HEAD' ? 'GET' : method
    return patterns.find((p) => (p.method === routeMethod || p.method === 'ALL') && p.pattern.test(path))?.path ?? UNMATCHED_ROUTE
  }
}

function pathOf(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  if (start === -1) return '/'
  const query = url.indexOf('?', start)
  return query === -1 ? url.slice(start) : url.slice(start, query)
}

/**
 * The function for `app.wrap`: given a route's handler and a request, the handler to call, which
 * records the request once it is answered. `routes` is read on first use (the app's routes, once built).
 */
export function requestObserver(routes: () => readonly Route[], logger: Logger, metrics: Metrics) {
  let match: ((method: string, path: string) => string) | undefined
  const templateOf = (request: Request) => (match ??= routeMatcher(routes()))(request.method, pathOf(request.url))

  const record = (request: Request, response: Response, route: string, series: RouteSeries, started: number, bytesOut: number) => {
    const seconds = (performance.now() - started) / 1000
    series.observe(response.status, seconds)
    const principal = principals.get(request)
    logger.request({
      method: request.method,
      route,
      status: response.status,
      durationMs: Math.round(seconds * 1e6) / 1000,
      traceId: response.headers.get('x-trace-id') ?? undefined,
      organizationId: principal?.organization.organization_id,
      tokenId: principal?.tokenId,
      bytesOut,
    })
  }

  /**
   * Records `response` with its Content-Length, which every answer keyward builds carries (JSON
   * answers, problems, the pages and documents): a body is never read or copied to measure it (a
   * copy of the 4 MiB docs script per request, unread by a slow client, held gigabytes). A HEAD
   * sends no body.
   */
  const answered = (request: Request, response: Response, route: string, series: RouteSeries, started: number) => {
    const length = request.method === 'HEAD' ? 0 : Number(response.headers.get('content-length') ?? 0)
    record(request, response, route, series, started, length)
  }

  const observe = (handler: Handler, known: { route: string; series: RouteSeries } | undefined): Handler => {
    return (request) => {
      const started = performance.now()
      let route: string
      let series: RouteSeries
      if (known) ({ route, series } = known)
      else series = metrics.series((route = templateOf(request)), request.method)
      const response = handler(request)
      if (response instanceof Promise) return response.then((answer) => (answered(request, answer, route, series, started), answer))
      answered(request, response, route, series, started)
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
      if (!head) headByHandler.set(handler, (head = observe(handler, undefined)))
      return head
    }
    const observed = byHandler.get(handler)
    if (observed) return observed
    // Bun's router gives the requests of its routes `params`; Elysia's router (no route matched,
    // or `app.handle`) handles every route with one handler: matched per request.
    if ((request as { params?: unknown }).params === undefined) return (general ??= observe(handler, undefined))
    const route = templateOf(request)
    const wrapped = observe(handler, { route, series: metrics.series(route, request.method) })
    byHandler.set(handler, wrapped)
    return wrapped
  }
}
