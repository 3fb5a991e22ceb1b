/**
 * The refusals of the API's rules, each with its status and a stable `code` (docs/api.md, "Status
 * codes and errors"): thrown by the services and the HTTP layer alike, answered as an RFC 9457
 * problem by src/http/errors.ts.
 */

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
    'trailers_not_supported',
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
