/**
 * The baseline for bench/http.ts and bench/run.ts: a bare `Bun.serve` that answers every request
 * with one canned response (same status, headers and body as keyward's answer to a read by id:
 * GET /api/organizations/{id} in http.ts, GET /api/enrollments/{id} in run.ts).
 *
 *   bun run bench/bare-server.ts --port P --response FILE
 *
 * FILE is JSON: { "status": 200, "headers": [["content-type", "..."], ...], "body": "..." }.
 * Bun adds Date and Content-Length itself, exactly as it does for keyward.
 */
import { parseArgs } from 'node:util'

const { values } = parseArgs({ options: { port: { type: 'string' }, response: { type: 'string' } } })
const canned = (await Bun.file(values.response!).json()) as { status: number; headers: [string, string][]; body: string }

const server = Bun.serve({
  hostname: '127.0.0.1',
  port: Number(values.port),
  // A new Response per request, as any real handler would build.
  fetch: () => new Response(canned.body, { status: canned.status, headers: canned.headers }),
})
console.error(`bare-server: listening on http://127.0.0.1:${server.port}`)
process.once('SIGTERM', () => server.stop(true).then(() => process.exit(0)))
