/**
 * The limit of a read by id and the steps between it and keyward (bench/run.ts measures them beside
 * keyward, to show where an authenticated read's time goes): each answers every request with
 * keyward's own answer to that read, plus what the step adds.
 *
 *   bun run bench/ladder-server.ts --variant bare|header|elysia --port P --response FILE
 *
 *   bare     Bun.serve with one canned Response per request (the same status, headers and body as
 *            keyward's answer; Bun adds Date and Content-Length itself, exactly as it does for keyward)
 *   header   Bun.serve that reads the Authorization header (Bun builds the request's Headers for it)
 *            and answers with a fresh trace id in the x-trace-id header and the body, as keyward must
 *   elysia   the same inside an Elysia route served by Elysia's listen (Bun's native router), with
 *            no hooks or plugins: the framework's own floor for this request
 *
 * FILE is JSON: { "status": 200, "headers": [["content-type", "..."], ...], "body": "..." }, whose
 * body ends with `"trace_id":"<uuid>"}`.
 */
import { parseArgs } from 'node:util'
import { Elysia } from 'elysia'

const { values } = parseArgs({ options: { variant: { type: 'string' }, port: { type: 'string' }, response: { type: 'string' } } })
const canned = (await Bun.file(values.response!).json()) as { status: number; headers: [string, string][]; body: string }
const TRACE_AT = canned.body.length - '"}'.length - 36
if (!/^[0-9a-f-]{36}"}$/.test(canned.body.slice(TRACE_AT))) throw new Error('the canned body does not end with a trace_id')
const contentType = canned.headers.find(([name]) => name.toLowerCase() === 'content-type')?.[1] ?? 'application/json'

/** The canned answer with a new trace id, after reading the header keyward authenticates with. */
function answer(request: Request): { body: string; traceId: string } {
  if (!request.headers.get('authorization')) throw new Error('no Authorization header')
  const traceId = crypto.randomUUID()
  return { body: `${canned.body.slice(0, TRACE_AT)}${traceId}"}`, traceId }
}

const port = Number(values.port)
if (values.variant === 'bare') {
  // A new Response per request, as any real handler would build.
  Bun.serve({ hostname: '127.0.0.1', port, fetch: () => new Response(canned.body, { status: canned.status, headers: canned.headers }) })
} else if (values.variant === 'header') {
  Bun.serve({
    hostname: '127.0.0.1',
    port,
    fetch: (request) => {
      const { body, traceId } = answer(request)
      return new Response(body, { status: canned.status, headers: { 'content-type': contentType, 'x-trace-id': traceId } })
    },
  })
} else if (values.variant === 'elysia') {
  new Elysia()
    .get('/api/enrollments/:id', ({ request, set }) => {
      const { body, traceId } = answer(request)
      set.headers['content-type'] = contentType
      set.headers['x-trace-id'] = traceId
      return body
    })
    .listen({ hostname: '127.0.0.1', port, development: false, reusePort: false })
} else {
  throw new Error(`unknown --variant ${values.variant}`)
}
console.error(`ladder-server (${values.variant}): listening on http://127.0.0.1:${port}`)
process.once('SIGTERM', () => process.exit(0))
