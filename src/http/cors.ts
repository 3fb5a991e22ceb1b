/**
 * CORS for the configured origins only (`serve --cors-origin`, off by default: docs/api.md, "CORS"),
 * so that a page on one of them, a browser console say, can call the API. A preflight from such an
 * origin is answered 204 at once, charged to its client's address like any request without a token
 * (a 429 once it has none left: docs/operations.md); every other answer to it carries
 * Access-Control-Allow-Origin and the response headers a script may read. Other origins get answers
 * without these headers, which a browser then refuses to hand to the page.
 */
import { Elysia } from 'elysia'
import { newTraceId } from './foundation'
import type { ChargeAddress } from './context'

const ALLOWED_METHODS = 'GET, POST, PATCH, DELETE'
const ALLOWED_HEADERS = 'authorization, content-type'
const EXPOSED_HEADERS = 'x-trace-id, www-authenticate, retry-after, ratelimit, ratelimit-policy'
/** How long a browser may reuse a preflight's answer, in seconds. */
const PREFLIGHT_MAX_AGE = '600'

/** `https://console.example.com`: scheme, host and port, no path; null if `value` is not one. */
export function parseOrigin(value: string): string | null {
  try {
    const url = new URL(value)
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.origin === value.replace(/\/$/, '') ? url.origin : null
  } catch {
    return null
  }
}

/** `chargeAddress`: the rate limit of a request without a token (`addressCharge` in context.ts). */
export const cors = (origins: readonly string[], chargeAddress: ChargeAddress) => {
  const allowed = new Set(origins)
  return new Elysia({ name: 'cors' }).onRequest(({ request, set }) => {
    // Answers differ by Origin once CORS is on: caches must keep them apart.
    set.headers.vary = 'Origin'
    const origin = request.headers.get('origin')
    if (origin === null || !allowed.has(origin)) return
    set.headers['access-control-allow-origin'] = origin
    set.headers['access-control-expose-headers'] = EXPOSED_HEADERS
    if (request.method === 'OPTIONS' && request.headers.has('access-control-request-method')) {
      // A 429 (thrown) is answered by foundation's error hook, with the headers set so far.
      chargeAddress(request, set)
      return new Response(null, {
        status: 204,
        headers: {
          ...(set.headers as Record<string, string>),
          'access-control-allow-methods': ALLOWED_METHODS,
          'access-control-allow-headers': ALLOWED_HEADERS,
          'access-control-max-age': PREFLIGHT_MAX_AGE,
          'x-trace-id': newTraceId(),
        },
      })
    }
  })
}
