/**
 * What every controller needs: the store, token verification, settings; the `authenticated`
 * plugin that every /api route goes through (401), and `takesBody` for the routes that read a body
 * (then 413 and 415): CONTRACT section 3's order, and no body is read for a request without a valid token.
 */
import { Elysia } from 'elysia'
import type { Store } from '../store/store'
import type { TokenVerifier } from '../auth/tokens'
import { authenticate } from './auth'
import { readBody, type RequestBody } from './body'
import { withTraceId } from './foundation'

export interface AppConfig {
  /** host_url handed out with a new application. */
  readonly publicUrl: string
  /** New installations start `verified` instead of `unregistered`. */
  readonly autoVerifyInstallations: boolean
}

export interface AppDeps {
  readonly store: Store
  readonly verifier: TokenVerifier
  readonly config: AppConfig
}

export const authenticated = (deps: AppDeps) =>
  // `request.headers.get`, not the `headers` context: asking Elysia for `headers` makes it copy every
  // request header into a plain object on every request.
  new Elysia().derive({ as: 'scoped' }, ({ request, set }) => {
    withTraceId(set)
    const principal = authenticate(deps.store.tables, deps.verifier, request.headers.get('authorization') ?? undefined)
    // `body` is declared here for the handlers' types; `takesBody` reads it after this hook.
    return { principal, body: undefined as RequestBody | undefined }
  })

/**
 * Route options of every route that takes a body (`{ ...takesBody, detail: ... }`). Elysia must not
 * parse the body itself ('none'): it would do so before any hook, before the token is checked. The
 * transform runs after `authenticated` (a route's own hooks come after its plugins'). Only these
 * routes get it: any parse hook would make Elysia compile GET routes async too (README, Performance).
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
 * A read's answer, held back until everything it may have seen is durable: no response shows a
 * write that could still fail. Free when nothing is in flight.
 */
export function settled<T>(store: Store, value: T): T | Promise<T> {
  const barrier = store.readBarrier()
  return barrier ? barrier.then(() => value) : value
}
