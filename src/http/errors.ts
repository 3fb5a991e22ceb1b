/**
 * Every failure is an RFC 9457 problem body with a stable `code` (docs/api.md, "Status codes and errors"):
 * an ApiError (src/modules/shared/errors.ts) thrown anywhere below a handler, rendered here by the
 * app's error hook.
 */
import { STATUS_CODES } from 'node:http'
import * as v from 'valibot'
import { PROBLEM_CODES, type FieldError, type ProblemCode, type ProblemStatus } from '../modules/shared/errors'

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
