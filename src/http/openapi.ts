/**
 * GET /openapi.json: built from the app's real routes and the same valibot schemas the handlers
 * validate with, so the document cannot drift from what the server accepts.
 */
import type { GenericSchema } from 'valibot'
import { toJsonSchema } from '@valibot/to-json-schema'

interface RouteDoc {
  readonly summary: string
  readonly tag: string
  readonly body?: GenericSchema
  readonly query?: GenericSchema
  /** Success status; 200 unless given. */
  readonly status?: number
  /** Routes outside /api need no token. */
  readonly public?: boolean
}

const DOC = 'x-keyward'

/** Route metadata for Elysia's `detail`, read back by `openApiDocument`. */
export function doc(route: RouteDoc) {
  return { summary: route.summary, tags: [route.tag], [DOC]: route }
}

const problem = { description: 'RFC 9457 problem', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } }

export function openApiDocument(routes: readonly { method: string; path: string; hooks: { detail?: unknown } }[], version: string) {
  const paths: Record<string, Record<string, unknown>> = {}
  for (const route of routes) {
    const meta = (route.hooks.detail as Record<string, unknown> | undefined)?.[DOC] as RouteDoc | undefined
    if (!meta) continue
    const path = route.path.replace(/:([a-z_]+)/g, '{$1}')
    const parameters = [...route.path.matchAll(/:([a-z_]+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string', format: 'uuid' },
    }))
    if (meta.query) {
      const schema = jsonSchema(meta.query) as { properties?: Record<string, unknown>; required?: string[] }
      for (const [name, property] of Object.entries(schema.properties ?? {})) {
        parameters.push({ name, in: 'query', required: schema.required?.includes(name) ?? false, ...queryParameter(property) } as never)
      }
    }
    paths[path] ??= {}
    paths[path][route.method.toLowerCase()] = {
      summary: meta.summary,
      tags: [meta.tag],
      ...(meta.public ? { security: [] } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(meta.body ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(meta.body) } } } } : {}),
      responses: { [String(meta.status ?? 200)]: { description: 'Success' }, default: problem },
    }
  }
  return {
    openapi: '3.1.0',
    info: { title: 'keyward', version, description: 'Administration API for cryptographic device enrollment.' },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Problem: {
          type: 'object',
          required: ['type', 'title', 'status', 'code', 'detail', 'trace_id'],
          properties: {
            type: { type: 'string' },
            title: { type: 'string' },
            status: { type: 'integer' },
            code: { type: 'string' },
            detail: { type: 'string' },
            trace_id: { type: 'string', format: 'uuid' },
            errors: { type: 'array', items: { type: 'object', properties: { path: { type: 'string' }, message: { type: 'string' } } } },
          },
        },
      },
    },
    security: [{ bearer: [] }],
    paths,
  }
}

function jsonSchema(schema: GenericSchema): unknown {
  // Transforms and custom checks have no JSON Schema form; the document keeps the types they refine.
  const { $schema: _, ...rest } = toJsonSchema(schema, { errorMode: 'ignore' }) as Record<string, unknown>
  return rest
}

/** Multi-value filters validate "string or array", then the array: document the array, repeatable. */
function queryParameter(property: unknown) {
  const { anyOf: _, ...schema } = property as { anyOf?: unknown; type?: string }
  if (schema.type !== 'array') return { schema: property }
  return { schema, style: 'form', explode: true, description: 'Repeat the parameter or separate values with commas.' }
}
