/**
 * The request log's route template of a request Bun's router answered (src/http/observe.ts): found
 * once per route handler, from a request whose path names the route.
 */
import { expect, test } from 'bun:test'
import { requestObserver } from '../../src/http/observe'
import { memoryLogger } from '../../src/ops/logger'
import { Histogram, Metrics } from '../../src/ops/metrics'

const ROUTES = [
  { method: 'GET', path: '/api/organizations' },
  { method: 'GET', path: '/api/organizations/:organization_id' },
  { method: 'PATCH', path: '/api/installations/:installation_id' },
  { method: 'PATCH', path: '/api/installations/:installation_id/verify' },
]

/** A request as Bun's router hands it over: with `params`; the URL parser resolves its dot segments (`/a/./b` reads `/a/b`). */
const routed = (method: string, path: string, params: Record<string, string>) => Object.assign(new Request(`http://localhost${path}`, { method }), { params })

test("a first request that reads back resolved (a last segment '.') is filed under the route Bun matched, and does not file its handler", () => {
  const logger = memoryLogger()
  const wrap = requestObserver(() => ROUTES, logger, new Metrics())
  const handler = () => new Response('{}', { status: 400, headers: { 'content-length': '2' } })
  const id = crypto.randomUUID()
  for (const [path, organization_id] of [['/api/organizations/.', '.'], [`/api/organizations/${id}`, id], ['/api/organizations/.', '.']]) {
    const request = routed('GET', path!, { organization_id: organization_id! })
    wrap(handler, request)(request)
  }
  expect(logger.entries.map((entry) => entry.fields.route)).toEqual(Array(3).fill('/api/organizations/:organization_id'))
})

test("a dot segment where a route takes an id reads back as another route's path: logged under the route Bun matched, first or not (PATCH /api/installations/./verify is no update)", () => {
  const logger = memoryLogger()
  const wrap = requestObserver(() => ROUTES, logger, new Metrics())
  const verify = () => new Response('{}', { status: 401, headers: { 'content-length': '2' } })
  const update = () => new Response('{}', { status: 200, headers: { 'content-length': '2' } })
  const id = crypto.randomUUID()
  const sent: [() => Response, string, string][] = [
    [verify, '/api/installations/./verify', '.'],
    [verify, `/api/installations/${id}/verify`, id],
    [update, `/api/installations/${id}`, id],
    [verify, '/api/installations/%2e%2e/verify', '..'],
  ]
  for (const [handler, path, installation_id] of sent) {
    const request = routed('PATCH', path, { installation_id })
    wrap(handler, request)(request)
  }
  expect(logger.entries.map((entry) => entry.fields.route)).toEqual([
    '/api/installations/:installation_id/verify',
    '/api/installations/:installation_id/verify',
    '/api/installations/:installation_id',
    '/api/installations/:installation_id/verify',
  ])
})

test("a histogram's _count counts every observation, those past its last bound (+Inf) too", () => {
  const histogram = new Histogram()
  histogram.observe(0.001)
  histogram.observe(60)
  const text = histogram.render('d', '')
  expect(text).toContain('d_bucket{le="+Inf"} 2\n')
  expect(text).toContain('d_count 2\n')
  expect(text).toContain('d_sum 60.001\n')
})
