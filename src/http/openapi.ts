/**
 * GET /openapi.json: built from the app's real routes and the same valibot schemas the handlers
 * validate with (requests) and type their views with (answers), so the document cannot drift from
 * what the server accepts and answers. docs/api.md is the prose beside it.
 */
import * as v from 'valibot'
import type { GenericSchema } from 'valibot'
import { toJsonSchema, toJsonSchemaDefs, type ConversionConfig, type JsonSchema } from '@valibot/to-json-schema'
import { ProblemBody } from './errors'
import { PROBLEM_CODES, type ProblemStatus } from '../modules/shared/errors'
import { OPENAPI_FORM } from '../modules/shared/model'
import { UUID_ANY_CASE } from '../storage/records'
import { OrganizationRecord, OrganizationSummaryRecord } from '../modules/organizations/model'
import { ApplicationRecord, CreatedApplicationRecord } from '../modules/applications/model'
import { ConsumerRecord } from '../modules/consumers/model'
import { InstallationRecord } from '../modules/installations/model'
import { EnrollmentRecord, KeysetRecord } from '../modules/enrollments/model'
import { TokenRecord } from '../modules/tokens/model'
import { AuditEventRecord } from '../modules/audit/model'

/** A success answer: its JSON body's schema, or another content type described in words. */
type Success = GenericSchema | { readonly description: string; readonly contentType: string }

/** Errors a route may declare; those every route of its kind answers are added (`errorStatuses`). */
type DeclaredError = 400 | 401 | 403 | 404 | 409 | 503

interface RouteDoc {
  /** Stable: generated clients name their functions after it. */
  readonly operationId: string
  readonly summary: string
  readonly description?: string
  readonly tag: Tag
  readonly body?: GenericSchema
  readonly query?: GenericSchema
  readonly responses: { readonly [status: number]: Success }
  readonly errors?: readonly DeclaredError[]
  /** Routes outside /api need no token. */
  readonly public?: boolean
  /** A public route charged to the client's address (the documents): RateLimit headers, and 429. */
  readonly limited?: boolean
  /** Its success answer holds a secret shown this once, sent with `Cache-Control: no-store`. */
  readonly shownOnce?: boolean
}

const DOC = 'x-keyward'

/** Route metadata for Elysia's `detail`, read back by `openApiDocument`. */
export function doc(route: RouteDoc) {
  return { summary: route.summary, tags: [route.tag], [DOC]: route }
}

const TAGS = {
  organizations: 'The vendor, its customers and their partners.',
  'organization environments': "A customer's virtual environments (customers enabled for them at creation).",
  applications: "A customer's applications; the answer to a create carries the client configuration.",
  'application environments': "The environments of an application of a customer enabled for virtual environments.",
  consumers: "The end users of a customer's applications.",
  installations: 'A device, or an app in one browser instance.',
  enrollments: 'A consumer on an installation in an application and environment.',
  keysets: "An enrollment's keys; a new keyset retires the previous one.",
  tokens: 'Bearer tokens: issued (the token string shown once), listed and revoked by admins.',
  audit: 'Every change, who made it and what it changed; for admins and viewers of the vendor and of customers.',
  service: 'Liveness, readiness, this document and its page (no token needed); metrics (a vendor token).',
} as const
type Tag = keyof typeof TAGS

/** Answer records shown as named schemas (the rest are inlined where used). */
const COMPONENT_SCHEMAS: Record<string, GenericSchema> = {
  Organization: OrganizationRecord,
  OrganizationSummary: OrganizationSummaryRecord,
  Application: ApplicationRecord,
  CreatedApplication: CreatedApplicationRecord,
  Consumer: ConsumerRecord,
  Installation: InstallationRecord,
  Enrollment: EnrollmentRecord,
  Keyset: KeysetRecord,
  Token: TokenRecord,
  AuditEvent: AuditEventRecord,
  Problem: ProblemBody,
}

/** Every error, by status: its component name and when it is answered (docs/api.md, "Status codes and errors"). */
const ERRORS: Record<number, readonly [name: string, description: string]> = {
  400: ['BadRequest', 'Malformed: body not JSON, a missing or mistyped field, a non-UUID identifier, a bad query value (`errors` lists the fields); or a rule of this request was broken.'],
  401: ['Unauthorized', 'No valid bearer token, or its organization (or its customer) is suspended; also a request naming a suspended application\'s enrollment.'],
  403: ['Forbidden', "The record is in the token's scope, but its role or organization type may not do this."],
  404: ['NotFound', "No such record in the token's scope (records of other tenants are answered exactly like missing ones)."],
  409: ['Conflict', 'The change conflicts with the current state (already in that state, still in use, owned by another customer, ...).'],
  413: ['PayloadTooLarge', 'The request body is over 64 KiB.'],
  415: ['UnsupportedMediaType', 'A request body whose Content-Type is not application/json, or with a Content-Encoding other than identity.'],
  429: ['TooManyRequests', 'Over the rate limit of the token (or, without a valid token, of the client address): `rate_limited`; `Retry-After` says in how many seconds to try again.'],
  431: [
    'RequestHeaderFieldsTooLarge',
    'The request line and headers together are over 16 KiB (a query of some 400 identifiers): refused by the HTTP server before keyward reads the request, with no body and no trace id.',
  ],
  500: ['InternalError', 'An unexpected fault; it was logged with the trace id.'],
  503: [
    'StorageUnavailable',
    'Changes cannot be made durable now: a change could not be written and was not made, nor is any read answered that saw it (`storage_unavailable`), or the database cannot be reached (`database_unavailable`).',
  ],
}

/**
 * Errors by route kind (docs/api.md "Status codes and errors"), beyond what a route declares. A GET's body is never
 * read (Bun's server does not pass it on: docs/api.md, "Status codes and errors"), so reads answer no 413 or 415.
 */
function errorStatuses(meta: RouteDoc, method: string, hasPathIds: boolean): number[] {
  const statuses = new Set<number>([...(meta.errors ?? []), 500])
  if (!meta.public) for (const status of method === 'GET' ? [401, 429, 503] : [401, 413, 415, 429, 503]) statuses.add(status)
  if (meta.limited) statuses.add(429)
  if (hasPathIds) statuses.add(400).add(404)
  if (meta.body || meta.query) statuses.add(400)
  // Any request may meet the 431 (headers over 16 KiB), which has no body: the document says so
  // once (info), and lists it only on operations with no other 4xx. Listed on every operation, it
  // made a generated client's error type `unknown` (hey-api joins every error's body type).
  if (![...statuses].some((status) => status >= 400 && status < 500)) statuses.add(431)
  return [...statuses].sort((a, b) => a - b)
}

const UUID_PATTERN = UUID_ANY_CASE.source
const TRACE_ID_HEADER = { $ref: '#/components/headers/TraceId' }
/** On every answer of a rate-limited route while limits are on (docs/operations.md, "Rate limits"). */
const RATE_LIMIT_HEADERS = {
  'ratelimit-policy': { $ref: '#/components/headers/RateLimitPolicy' },
  ratelimit: { $ref: '#/components/headers/RateLimit' },
}

export function openApiDocument(
  routes: readonly { method: string; path: string; hooks: { detail?: unknown } }[],
  version: string,
  publicUrl: string,
) {
  const paths: Record<string, Record<string, unknown>> = {}
  const operationIds = new Set<string>()
  for (const route of routes) {
    const meta = (route.hooks.detail as Record<string, unknown> | undefined)?.[DOC] as RouteDoc | undefined
    if (!meta) continue
    if (operationIds.has(meta.operationId)) throw new Error(`operationId ${meta.operationId} is used twice`)
    operationIds.add(meta.operationId)
    const pathIds = [...route.path.matchAll(/:([a-z_]+)/g)].map((m) => m[1]!)
    const parameters: object[] = pathIds.map((name) => ({
      name,
      in: 'path',
      required: true,
      schema: { type: 'string', format: 'uuid', pattern: UUID_PATTERN },
    }))
    if (meta.query) parameters.push(...queryParameters(meta.query))
    const responses: Record<string, unknown> = {}
    for (const [status, success] of Object.entries(meta.responses)) responses[status] = successResponse(Number(status), success, !meta.public || meta.limited === true, meta.shownOnce === true)
    for (const status of errorStatuses(meta, route.method, pathIds.length > 0)) responses[status] = { $ref: `#/components/responses/${ERRORS[status]![0]}` }
    const path = route.path.replace(/:([a-z_]+)/g, '{$1}')
    paths[path] ??= {}
    paths[path][route.method.toLowerCase()] = {
      operationId: meta.operationId,
      summary: meta.summary,
      ...(meta.description ? { description: meta.description } : {}),
      tags: [meta.tag],
      ...(meta.public ? { security: [] } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(meta.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(meta.body) } } } } : {}),
      responses,
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'keyward',
      version,
      description:
        'Administration API for cryptographic device enrollment: organizations, applications and their environments, consumers, installations, enrollments and keysets; ' +
        'the tokens that call it and the audit trail of every change. ' +
        'Every /api request carries `Authorization: Bearer <token>`; every failure is an RFC 9457 problem with a stable `code`, ' +
        'except a 431 (the request line and headers over 16 KiB), which any request may meet, answered by the HTTP server with no body. ' +
        'The reference in prose is docs/api.md in the repository.',
    },
    servers: [{ url: publicUrl, description: 'This server' }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A token from `keyward init`, `keyward serve` on first start, `keyward issue-token`, or POST /api/tokens.' },
      },
      schemas: componentSchemas(),
      headers: {
        TraceId: { description: 'New for each request; equal to the body\'s `trace_id` where it has one.', schema: { type: 'string', format: 'uuid' } },
        RateLimitPolicy: {
          description: 'On every answer of a rate-limited route (the /api routes and /metrics) while limits are on: the burst `q` per window of `w` = 1 second.',
          schema: { type: 'string', examples: ['"default";q=200;w=1'] },
        },
        RateLimit: {
          description: 'With RateLimit-Policy: the requests `r` left now, and the seconds `t` until the allowance is full again.',
          schema: { type: 'string', examples: ['"default";r=143;t=1'] },
        },
        RetryAfter: { description: 'Whole seconds until one request is allowed again.', schema: { type: 'integer', minimum: 1 } },
        NoStore: { description: 'The answer holds a secret shown this once: no cache may keep it.', schema: { type: 'string', const: 'no-store' } },
      },
      responses: Object.fromEntries(
        Object.entries(ERRORS).map(([status, [name, description]]) => [
          name,
          status === '431' ? { description } : {
            description,
            headers: {
              'x-trace-id': TRACE_ID_HEADER,
              ...RATE_LIMIT_HEADERS,
              ...(status === '401' ? { 'www-authenticate': { description: 'Bearer realm="keyward"', schema: { type: 'string' } } } : {}),
              ...(status === '429' ? { 'retry-after': { $ref: '#/components/headers/RetryAfter' } } : {}),
            },
            // The Problem, its code narrowed to this status's (a generated client's type says which it may get).
            content: { 'application/problem+json': { schema: problemOf(Number(status) as ProblemStatus) } },
          },
        ]),
      ),
    },
  }
}

function problemOf(status: ProblemStatus) {
  // Typed as well as narrowed: a `const` without its type is read as a string by some generators
  // (orval), and `Problem & {status?: '409'}` is then an empty type.
  const narrowed = { status: { type: 'integer', const: status }, code: { type: 'string', enum: [...PROBLEM_CODES[status]] } }
  return { allOf: [{ $ref: '#/components/schemas/Problem' }, { type: 'object', properties: narrowed }] }
}

function successResponse(status: number, success: Success, rateLimited: boolean, shownOnce: boolean) {
  const headers = { 'x-trace-id': TRACE_ID_HEADER, ...(rateLimited ? RATE_LIMIT_HEADERS : {}), ...(shownOnce ? { 'cache-control': { $ref: '#/components/headers/NoStore' } } : {}) }
  if ('contentType' in success) return { description: success.description, headers, content: { [success.contentType]: { schema: { type: 'string' } } } }
  const description = status === 201 ? 'Created' : 'OK'
  return { description, headers, content: { 'application/json': { schema: jsonSchema(success) } } }
}

const CONVERSION: ConversionConfig = {
  target: 'draft-2020-12',
  // What a client sends, before the schema's own transformations (lowercasing, defaults, parsing).
  typeMode: 'input',
  errorMode: 'throw',
  // Checks are code; each one that JSON Schema can say is said beside it with `v.metadata`.
  ignoreActions: ['check', 'to_lower_case', 'to_upper_case'],
  definitions: COMPONENT_SCHEMAS,
  overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
  overrideAction: ({ valibotAction }) => declaredForm(valibotAction),
  overrideSchema: ({ valibotSchema }) => (valibotSchema.type === 'optional' ? optionalForm(valibotSchema) : undefined),
}

function componentSchemas() {
  return toJsonSchemaDefs(COMPONENT_SCHEMAS, CONVERSION)
}

function jsonSchema(schema: GenericSchema): JsonSchema {
  const { $schema: _, $defs: __, ...rest } = toJsonSchema(schema, CONVERSION)
  return rest
}

/** The form a pipe declared for the document in place of its conversion (see `OPENAPI_FORM`). */
function declaredForm(action: unknown): JsonSchema | undefined {
  const { type, metadata } = action as { type: string; metadata?: Record<string, unknown> }
  return type === 'metadata' ? (metadata?.[OPENAPI_FORM] as JsonSchema | undefined) : undefined
}

/**
 * An optional whose pipe declares a form: that form, with the pipe's last description. The conversion
 * of such a pipe stops at its first transformation, before a description added after it, and the
 * optional's default is the text a query value would be (page_size's "100") where the form carries
 * the value it stands for.
 */
function optionalForm(optional: unknown): JsonSchema | undefined {
  const items = flatPipe((optional as { wrapped: unknown }).wrapped)
  const form = items.map(declaredForm).find((found) => found !== undefined)
  if (!form) return undefined
  const description = items.findLast((item) => (item as { type: string }).type === 'description') as { description: string } | undefined
  return { ...form, ...(description ? { description: description.description } : {}) }
}

function flatPipe(schema: unknown): unknown[] {
  return ((schema as { pipe?: readonly unknown[] }).pipe ?? []).flatMap((item) => [item, ...flatPipe(item)])
}

/** Query parameters from an object schema; lists are repeated or comma-separated (`?ids=a&ids=b`). */
function queryParameters(query: GenericSchema) {
  const schema = jsonSchema(query) as { properties?: Record<string, JsonSchema & { description?: string }>; required?: string[] }
  return Object.entries(schema.properties ?? {}).map(([name, property]) => {
    const { description, ...parameterSchema } = property
    return {
      name,
      in: 'query',
      required: schema.required?.includes(name) ?? false,
      ...(description ? { description } : {}),
      schema: parameterSchema,
      ...(parameterSchema.type === 'array' ? { style: 'form', explode: true } : {}),
    }
  })
}

/** GET /openapi.json's own answer, as far as a schema of schemas is useful here. */
export const OpenApiDocumentAnswer = v.looseObject({ openapi: v.string(), info: v.looseObject({}), paths: v.looseObject({}) })
