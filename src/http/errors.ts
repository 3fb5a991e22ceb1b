/**
 * Every failure is an RFC 9457 problem body with a stable `code` (docs/api.md, "Status codes and errors").
 * Throw an ApiError anywhere below a handler; the app's error hook renders it.
 */
import { STATUS_CODES } from 'node:http'
import * as v from 'valibot'

export interface FieldError {
  readonly path: string
  readonly message: string
}

/**
 * Every problem's `code`, by status (docs/api.md, "Status codes and errors"): the values clients may
 * switch on, listed in /openapi.json. An ApiError takes only a code of its status from here, so a
 * new code cannot be answered without being listed.
 */
export const PROBLEM_CODES = {
  400: [
    'invalid_json',
    'body_required',
    'validation_failed',
    'too_many_parameters',
    'invalid_identifier',
    'parent_required',
    'invalid_parent',
    'environments_not_allowed',
    'not_a_customer',
    'organization_required',
    'unknown_environment',
    'invalid_public_key',
    'enrollment_mismatch',
  ],
  401: ['unauthorized'],
  403: ['forbidden'],
  404: ['not_found'],
  409: [
    'already_revoked',
    'already_in_state',
    'vendor_always_active',
    'environment_exists',
    'too_many_environments',
    'too_many_partners',
    'too_many_applications',
    'too_many_keysets',
    'environment_not_supported',
    'environment_is_default',
    'environment_in_use',
    'last_environment',
    'environment_has_keysets',
    'id_owned_by_another_customer',
    'already_enrolled',
    'consumer_suspended',
    'installation_suspended',
    'enrollment_suspended',
  ],
  413: ['payload_too_large'],
  415: ['unsupported_media_type'],
  429: ['rate_limited'],
  500: ['internal_error'],
  503: ['storage_unavailable', 'database_unavailable'],
} as const

export type ProblemStatus = keyof typeof PROBLEM_CODES
/** The codes of `S` (all of them by default). */
export type ProblemCode<S extends ProblemStatus = ProblemStatus> = (typeof PROBLEM_CODES)[S][number]

export class ApiError<S extends ProblemStatus = ProblemStatus> extends Error {
  constructor(
    readonly status: S,
    readonly code: ProblemCode<S>,
    readonly detail: string,
    readonly errors?: readonly FieldError[],
  ) {
    super(detail)
    this.name = 'ApiError'
  }
}

export const badRequest = (code: ProblemCode<400>, detail: string, errors?: readonly FieldError[]) => new ApiError(400, code, detail, errors)
export const unauthorized = (detail = 'A valid bearer token is required.') => new ApiError(401, 'unauthorized', detail)
export const forbidden = (detail: string) => new ApiError(403, 'forbidden', detail)
export const notFound = (what: string) => new ApiError(404, 'not_found', `${what} was not found.`)
export const conflict = (code: ProblemCode<409>, detail: string) => new ApiError(409, code, detail)

/** The body of every error answer (GET /openapi.json shows it as `Problem`). */
export const ProblemBody = v.strictObject({
  type: v.literal('about:blank'),
  title: v.pipe(v.string(), v.description('The HTTP reason phrase.')),
  status: v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599)),
  code: v.pipe(v.picklist(Object.values(PROBLEM_CODES).flat()), v.description('Stable: clients may switch on it (docs/api.md lists them by status).'), v.examples(['not_found'])),
  detail: v.string(),
  trace_id: v.pipe(v.string(), v.uuid(), v.description('Equal to the x-trace-id header.')),
  errors: v.optional(
    v.pipe(
      v.array(v.strictObject({ path: v.pipe(v.string(), v.examples(['body.description'])), message: v.string() })),
      v.minLength(1),
      v.description('On validation errors: each field and what is wrong with it.'),
    ),
  ),
})

export function problemResponse(
  status: ProblemStatus,
  code: ProblemCode,
  detail: string,
  traceId: string,
  errors?: readonly FieldError[],
  /** Added to the answer's headers (rate limits, Retry-After). */
  headers?: Record<string, string>,
): Response {
  const body = {
    type: 'about:blank',
    title: STATUS_CODES[status] ?? 'Error',
    status,
    code,
    detail,
    trace_id: traceId,
    ...(errors && errors.length > 0 ? { errors } : {}),
  }
  const text = JSON.stringify(body)
  return new Response(text, {
    status,
    headers: {
      ...headers,
      'content-type': 'application/problem+json',
      // Set here because it is known here: the request log reads it (src/http/observe.ts).
      'content-length': String(Buffer.byteLength(text)),
      'x-trace-id': traceId,
      // RFC 6750: a 401 names the scheme the client should use.
      ...(status === 401 ? { 'www-authenticate': 'Bearer realm="keyward"' } : {}),
    },
  })
}
