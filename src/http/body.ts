/**
 * Request bodies are read only after the token is checked (`takesBody` in context.ts): an anonymous
 * request costs no body reading or parsing (docs/security.md). Reading answers 413 and 415 at once,
 * which is their place in the order of docs/api.md "Status codes and errors"; a body that is not JSON is kept as a verdict
 * and raised later, after 404 and 403.
 */
import * as v from 'valibot'
import { ApiError, badRequest, type FieldError } from '../modules/shared/errors'
import { queryTextOf } from './request-url'

export const MAX_BODY_BYTES = 64 * 1024

export type RequestBody =
  | { readonly kind: 'none' }
  | { readonly kind: 'json'; readonly value: unknown }
  | { readonly kind: 'invalid'; readonly reason: string }

const NO_BODY: RequestBody = { kind: 'none' }
const UNREADABLE: RequestBody = { kind: 'invalid', reason: 'The request body could not be read in full (cut short, or a malformed chunked encoding).' }
const utf8 = new TextDecoder('utf-8', { fatal: true })

const tooLarge = () => new ApiError(413, 'payload_too_large', `The request body is over ${MAX_BODY_BYTES} bytes.`)

export async function readBody(request: Request): Promise<RequestBody> {
  const declared = request.headers.get('content-length')
  if (declared !== null && Number(declared) > MAX_BODY_BYTES) throw tooLarge()
  // Bun 1.4.5 refuses trailers after a chunked body (a bare 400, the connection closed) only once
  // the body was read, so a change was made whose answer its client never got (docs/api.md "Status
  // codes and errors"): a request that announces them is refused before its body is read.
  if (declared === null && request.headers.has('trailer')) throw badRequest('trailers_not_supported', 'Trailers after a chunked body are not supported: send the request without them.')
  // With a declared length (checked above; the HTTP layer holds the body to it) read in one go: the
  // stream reader costs about half of a POST's CPU. Only chunked bodies are streamed against the limit.
  let bytes: Uint8Array | null
  try {
    bytes = declared !== null ? new Uint8Array(await request.arrayBuffer()) : await readAtMost(request, MAX_BODY_BYTES)
  } catch {
    // The client sent less than it declared and closed, or a malformed chunked encoding: a bad
    // request, not a fault of ours (no 500 in the log and metrics); raised where invalid JSON is.
    return UNREADABLE
  }
  if (bytes === null) throw tooLarge()
  if (bytes.length === 0) return NO_BODY
  if (!isJson(request.headers.get('content-type') ?? '')) {
    throw new ApiError(415, 'unsupported_media_type', 'Request bodies must be sent as Content-Type: application/json.')
  }
  // A coded body (gzip, say) is not read as if it were plain: what it says is unknown (RFC 9110
  // section 15.5.16). The header is a list of codings: empty, or identity only, is no coding.
  const coding = request.headers.get('content-encoding')
  if (coding !== null && coding.split(',').some((name) => !['', 'identity'].includes(name.trim().toLowerCase()))) {
    throw new ApiError(415, 'unsupported_media_type', 'Request bodies must be sent uncompressed (no Content-Encoding, or identity).')
  }
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    return { kind: 'invalid', reason: 'The request body is not valid UTF-8.' }
  }
  try {
    return { kind: 'json', value: JSON.parse(text) }
  } catch {
    return { kind: 'invalid', reason: 'The request body is not valid JSON.' }
  }
}

function isJson(contentType: string): boolean {
  const mediaType = contentType.split(';', 1)[0]!.trim().toLowerCase()
  return mediaType === 'application/json'
}

/** The body's bytes, or null once it passes `limit` (the rest is never read). */
async function readAtMost(request: Request, limit: number): Promise<Uint8Array | null> {
  if (!request.body) return new Uint8Array(0)
  const chunks: Uint8Array[] = []
  let size = 0
  const reader = request.body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      await reader.cancel().catch(() => {})
      return null
    }
    chunks.push(value)
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
}

/** The body validated against `schema`: 400 with field errors if it does not fit. */
export function parseBody<S extends v.GenericSchema>(schema: S, body: RequestBody | undefined): v.InferOutput<S> {
  if (!body || body.kind === 'none') throw badRequest('body_required', 'A JSON request body is required.')
  if (body.kind === 'invalid') throw badRequest('invalid_json', body.reason)
  return validate(schema, body.value, 'body')
}

/**
 * For routes that take no body (suspend, activate): a JSON body is ignored, but bytes that are not
 * JSON are still a 400 (docs/api.md "Status codes and errors"), like on every other route.
 */
export function ignoreBody(body: RequestBody | undefined): void {
  if (body?.kind === 'invalid') throw badRequest('invalid_json', body.reason)
}

/** More parameters than any honest query has (docs/security.md): refused before any is looked at. */
export const MAX_QUERY_PARAMETERS = 200
/** A validation problem lists at most this many `errors` (docs/security.md). */
export const MAX_FIELD_ERRORS = 20

/**
 * The request's query validated against `schema`. A repeated parameter arrives as an array (the
 * framework's parsed `query` keeps only its last value, which would silently drop filters); the
 * schema decides whether a parameter may repeat. The parameters are counted before any is decoded,
 * and collecting them is linear: each value is appended once.
 */
export function parseQuery<S extends v.GenericSchema>(schema: S, request: Request): v.InferOutput<S> {
  // From the URL's text: `new URL` refuses the URL Bun builds from a malformed Host (request-url.ts).
  const search = queryTextOf(request.url)
  // `&`-separated parts, counted without splitting more than one past the cap.
  if (search.split('&', MAX_QUERY_PARAMETERS + 1).length > MAX_QUERY_PARAMETERS) {
    throw badRequest('too_many_parameters', `A query may have at most ${MAX_QUERY_PARAMETERS} parameters; send a filter's values comma-separated.`)
  }
  // No prototype: a parameter named `__proto__` is a parameter like any other.
  const query: Record<string, string | string[]> = Object.create(null)
  for (const [key, value] of new URLSearchParams(search)) {
    const seen = query[key]
    if (seen === undefined) query[key] = value
    else if (Array.isArray(seen)) seen.push(value)
    else query[key] = [seen, value]
  }
  return validate(schema, query, 'query')
}

function validate<S extends v.GenericSchema>(schema: S, value: unknown, where: string): v.InferOutput<S> {
  const result = v.safeParse(schema, value, { abortPipeEarly: true })
  if (result.success) return result.output
  const errors: FieldError[] = result.issues.slice(0, MAX_FIELD_ERRORS).map((issue) => ({
    path: [where, ...(issue.path ?? []).map((item) => String(item.key))].join('.'),
    // valibot's own messages ("Invalid type: Expected ... but received "<the input>"") quote a
    // string they received: a token sent by mistake would be echoed. keyward's own (a picklist's
    // "state must be ...") are kept.
    message: typeof issue.input === 'string' && isValibotMessage(issue) ? `Invalid type: Expected ${issue.expected} but received a string` : issue.message,
  }))
  const first = errors[0]!
  const more = result.issues.length - errors.length
  return fail(errors, `${first.path}: ${first.message}${more > 0 ? ` (and ${more} more problems, not listed)` : ''}`)
}

/** A message valibot wrote itself, no message of keyward's given: `Invalid <what>: Expected <expected> but received <received>`. */
const isValibotMessage = (issue: v.BaseIssue<unknown>) => issue.message.startsWith('Invalid ') && issue.message.endsWith(`but received ${issue.received}`)

function fail(errors: FieldError[], detail: string): never {
  throw badRequest('validation_failed', detail, errors)
}
