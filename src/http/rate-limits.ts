/**
 * Rate limits on the /api routes (docs/operations.md "Rate limits"): charged
 * by `authenticated` once the token is known, per token, or per client address for a request
 * without a valid token. Every answer gets the `RateLimit-Policy` and `RateLimit` headers; a
 * request over the limit is answered 429 `rate_limited` with `Retry-After`.
 */
import { ApiError } from '../modules/shared/errors'
import type { RateLimiter } from '../ops/rate-limit'

export class RateLimited extends ApiError {
  constructor(readonly retryAfterSeconds: number) {
    super(429, 'rate_limited', `Too many requests; retry in ${retryAfterSeconds} s.`)
  }
}

/** The headers `problemFor` copies from a request's `set` onto its problem response. */
export const RATE_LIMIT_HEADERS = ['ratelimit-policy', 'ratelimit'] as const

export function rateLimits(limiter: RateLimiter) {
  const policy = `"default";q=${limiter.burst};w=1`
  /** Takes one request from `key`'s bucket: sets the headers, throws RateLimited when it is empty. */
  return (key: string, set: { headers: Record<string, unknown> }): void => {
    const allowance = limiter.take(key)
    set.headers['ratelimit-policy'] = policy
    set.headers['ratelimit'] = `"default";r=${allowance.remaining};t=${allowance.resetSeconds}`
    if (!allowance.allowed) throw new RateLimited(allowance.retryAfterSeconds)
  }
}

export type ChargeRequest = ReturnType<typeof rateLimits>
