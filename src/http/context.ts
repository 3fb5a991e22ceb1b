/**
 * What every controller needs: the store, token verification, settings; and the `authenticated`
 * plugin that every /api route goes through (401, then 413 and 415, in the contract's order).
 */
import { Elysia } from 'elysia'
import type { Store } from '../store/store'
import type { TokenVerifier } from '../auth/tokens'
import { authenticate } from './auth'
import { ApiError } from './errors'
import { MAX_BODY_BYTES, type RequestBody } from './body'
import { withTraceId } from './foundation'

export interface AppConfig {
  /** host_url handed out with a new application. */
  readonly publicUrl: string
  /** New installations start `verified` instead of `unregistered`. */
  readonly autoVerifyInstallations: boolean
  /** Origins whose pages may call the API from a browser (src/http/cors.ts); none by default. */
  readonly corsOrigins?: readonly string[]
}

export interface AppDeps {
  readonly store: Store
  readonly verifier: TokenVerifier
  readonly config: AppConfig
}

export const authenticated = (deps: AppDeps) =>
  // `request.headers.get`, not the `headers` context: asking Elysia for `headers` makes it copy every
  // request header into a plain object on every request.
  new Elysia().derive({ as: 'scoped' }, ({ request, body, set }) => {
    withTraceId(set)
    const principal = authenticate(deps.store.tables, deps.verifier, request.headers.get('authorization') ?? undefined)
    const envelope = body as RequestBody | undefined
    if (envelope?.kind === 'too-large') throw new ApiError(413, 'payload_too_large', `The request body is over ${MAX_BODY_BYTES} bytes.`)
    if (envelope?.kind === 'unsupported') {
      throw new ApiError(415, 'unsupported_media_type', 'Request bodies must be sent as Content-Type: application/json.')
    }
    return { principal, body: envelope }
  })

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
