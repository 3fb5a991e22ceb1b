/**
 * GET /readyz and GET /metrics (docs/operations.md). /healthz (app.ts) stays
 * the liveness check: it answers while the process serves; /readyz says whether changes can be made
 * durable now. /metrics goes through `authenticated` like any /api route, for a vendor token of any
 * role; any other token is answered as if there were no such route.
 */
import { Elysia } from 'elysia'
import * as v from 'valibot'
import { authenticated, type AppDeps } from './context'
import { withTraceId } from './foundation'
import { doc } from './openapi'
import { ApiError } from '../modules/shared/errors'
import { then } from '../storage/storage'
import { VERSION } from '../version'

/** GET /readyz's answer while changes can be made durable. */
const ReadyAnswer = v.strictObject({ status: v.literal('ready') })

const DETAIL = {
  storage_unavailable: 'The last write to disk failed: every change is still tried, and this is answered until one succeeds.',
  database_unavailable: 'The database cannot be reached, or answers without keyward\'s tables.',
} as const

export const operationsRoutes = (deps: AppDeps) =>
  new Elysia()
    .get(
      '/readyz',
      async ({ set }) => {
        withTraceId(set)
        const readiness = await deps.storage.readiness()
        if (readiness !== 'ready') throw new ApiError(503, readiness, DETAIL[readiness])
        return { status: 'ready' as const }
      },
      {
        detail: doc({
          operationId: 'getReadiness',
          summary: 'Readiness: whether changes can be made durable now',
          tag: 'service',
          public: true,
          errors: [503],
          responses: { 200: ReadyAnswer },
        }),
      },
    )
    .use(
      new Elysia().use(authenticated(deps)).get(
        '/metrics',
        ({ principal }) => {
          if (principal.customerId !== null) throw new ApiError(404, 'not_found', 'There is no such route.')
          return then(deps.storage.recordCounts(), (records) => {
            const text = deps.metrics.render(records, VERSION)
            return new Response(text, { headers: { ...METRICS_HEADERS, 'content-length': String(Buffer.byteLength(text)) } })
          })
        },
        {
          detail: doc({
            operationId: 'getMetrics',
            summary: 'Metrics in Prometheus text format (vendor tokens)',
            tag: 'service',
            errors: [404],
            responses: { 200: { description: 'Prometheus text format 0.0.4 (docs/operations.md lists the series)', contentType: 'text/plain' } },
          }),
        },
      ),
    )

const METRICS_HEADERS = { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }
