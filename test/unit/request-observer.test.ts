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
]

test("a first request that reads back normalised (a last segment '.') does not file its route's handler as unmatched", () => {
  const logger = memoryLogger()
  const wrap = requestObserver(() => ROUTES, logger, new Metrics())
  const handler = () => new Response('{}', { status: 400, headers: { 'content-length': '2' } })
  // As Bun's router hands them over: with `params`. The URL parser reads `/api/organizations/.` as `/api/organizations/`.
  const routed = (path: string) => Object.assign(new Request(`http://localhost${path}`), { params: { organization_id: '.' } })
  for (const path of ['/api/organizations/.', `/api/organizations/${crypto.randomUUID()}`, '/api/organizations/.']) {
    const request = routed(path)
    wrap(handler, request)(request)
  }
  expect(logger.entries.map((entry) => entry.fields.route)).toEqual(['unmatched', '/api/organizations/:organization_id', '/api/organizations/:organization_id'])
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
