/**
 * What every controller needs: the storage, token verification, settings; and the `authenticated`
 * plugin that every /api route goes through (401, then 413 and 415, in the contract's order).
 */
import { Elysia } from 'elysia'
import type { Storage } from '../storage/storage'
import { then, type Maybe } from '../storage/storage'
import type { TokenVerifier } from '../auth/tokens'
import { authenticate, type Principal } from './auth'
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
  readonly storage: Storage
  readonly verifier: TokenVerifier
  readonly config: AppConfig
}

interface Authenticated {
  readonly principal: Principal
  readonly body: RequestBody | undefined
}

function authenticateRequest(deps: AppDeps, request: Request, body: unknown, set: { headers: Record<string, unknown> }): Maybe<Authenticated> {
  withTraceId(set)
  // `request.headers.get`, not the `headers` context: asking Elysia for `headers` makes it copy every
  // request header into a plain object on every request.
  return then(authenticate(deps.storage, deps.verifier, request.headers.get('authorization') ?? undefined), (principal) => {
    const envelope = body as RequestBody | undefined
    if (envelope?.kind === 'too-large') throw new ApiError(413, 'payload_too_large', `The request body is over ${MAX_BODY_BYTES} bytes.`)
    if (envelope?.kind === 'unsupported') {
      throw new ApiError(415, 'unsupported_media_type', 'Request bodies must be sent as Content-Type: application/json.')
    }
    return { principal, body: envelope }
  })
}

/**
 * Elysia decides from a hook's source text whether to await it. The embedded storage answers
 * synchronously, and an awaited hook would make every request async: so it gets a hook written
 * without a call in its return (see docs/storage.md, "Reads without a promise").
 */
export const authenticated = (deps: AppDeps) =>
  deps.storage.synchronous
    ? new Elysia().derive({ as: 'scoped' }, ({ request, body, set }) => {
        const resolved = authenticateRequest(deps, request, body, set) as Authenticated
        return { principal: resolved.principal, body: resolved.body }
      })
    : new Elysia().derive({ as: 'scoped' }, async ({ request, body, set }) => {
        const resolved = await authenticateRequest(deps, request, body, set)
        return { principal: resolved.principal, body: resolved.body }
      })

/** The trace id `authenticated` put on this response (same value in header and body). */
export const traceIdOf = (set: { headers: Record<string, unknown> }) => set.headers['x-trace-id'] as string

/**
 * A read's answer, held back until everything it may have seen is durable: no response shows a
 * write that could still fail. Free when nothing is in flight.
 */
export function settled<T>(storage: Storage, value: Maybe<T>): Maybe<T> {
  return then(value, (answer) => storage.settle(answer))
}
