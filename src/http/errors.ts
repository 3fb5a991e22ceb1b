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

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    readonly detail: string,
    readonly errors?: readonly FieldError[],
  ) {
    super(detail)
    this.name = 'ApiError'
  }
}

export const badRequest = (code: string, detail: string, errors?: readonly FieldError[]) => new ApiError(400, code, detail, errors)
export const unauthorized = (detail = 'A valid bearer token is required.') => new ApiError(401, 'unauthorized', detail)
export const forbidden = (detail: string) => new ApiError(403, 'forbidden', detail)
export const notFound = (what: string) => new ApiError(404, 'not_found', `${what} was not found.`)
export const conflict = (code: string, detail: string) => new ApiError(409, code, detail)

/** The body of every error answer (GET /openapi.json shows it as `Problem`). */
export const ProblemBody = v.strictObject({
  type: v.literal('about:blank'),
  title: v.pipe(v.string(), v.description('The HTTP reason phrase.')),
  status: v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599)),
  code: v.pipe(v.string(), v.regex(/^[a-z][a-z0-9_]*$/), v.description('Stable: clients may switch on it.'), v.examples(['not_found'])),
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
  status: number,
  code: string,
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
