/**
 * The Elysia app, without listening: `serve` binds it, tests call `app.handle(request)` directly.
 */
import { Elysia } from 'elysia'
import * as v from 'valibot'
import { foundation, withTraceId } from './http/foundation'
import { doc, openApiDocument, OpenApiDocumentAnswer } from './http/openapi'
import { DOCS_SCRIPT_PATH, docsPageResponse, docsScriptResponse } from './http/docs-page'
import { cors } from './http/cors'
import { addressCharge, type AppDeps, type AppOptions } from './http/context'
import { operationsRoutes } from './http/operations'
import { requestObserver, sentRequestOf, type Route } from './http/observe'
import { createLogger } from './ops/logger'
import { Metrics } from './ops/metrics'
import { organizationsController } from './modules/organizations'
import { applicationsController } from './modules/applications'
import { environmentsController } from './modules/environments'
import { consumersController } from './modules/consumers'
import { installationsController } from './modules/installations'
import { enrollmentsController } from './modules/enrollments'
import { tokensController } from './modules/tokens'
import { auditController } from './modules/audit'
import { TokenService } from './modules/tokens/service'
import { OrganizationService } from './modules/organizations/service'
import { ApplicationService } from './modules/applications/service'
import { EnvironmentService } from './modules/environments/service'
import { AuditService } from './modules/audit/service'
import { ConsumerService } from './modules/consumers/service'
import { InstallationService } from './modules/installations/service'
import { EnrollmentService } from './modules/enrollments/service'
import { VERSION } from './version'

/** GET /healthz's answer while the server is serving. */
const HealthAnswer = v.strictObject({ status: v.literal('ok') })

/** Where `app.handle` requests come from: they have no socket (tests give their own `clientAddress`). */
const NO_ADDRESS = 'local'

export function createApp(options: AppOptions) {
  let app: ReturnType<typeof routes> | undefined
  const deps: AppDeps = {
    ...options,
    logger: options.logger ?? createLogger('json'),
    metrics: options.metrics ?? new Metrics(),
    clientAddress: options.clientAddress ?? ((request) => app?.server?.requestIP(sentRequestOf(request))?.address ?? NO_ADDRESS),
  }
  deps.storage.observeWrites((seconds) => deps.metrics.storageWrites.observe(seconds))
  return (app = routes(deps))
}

function routes(deps: AppDeps) {
  // Every service once, here: a controller is given the one it answers with.
  const organizations = new OrganizationService(deps.storage)
  const applications = new ApplicationService(deps.storage)
  const environments = new EnvironmentService(deps.storage)
  const consumers = new ConsumerService(deps.storage)
  const installations = new InstallationService(deps.storage, deps.config.autoVerifyInstallations)
  const enrollments = new EnrollmentService(deps.storage, installations)
  const tokens = new TokenService(deps.storage)
  const audit = new AuditService(deps.storage)
  // Requests that no checked token pays for: unknown paths, the documents, CORS preflights.
  const chargeAddress = addressCharge(deps)
  // The app's routes, for the request log's route templates: read on the first request.
  let routeList: () => readonly Route[] = () => []
  // Paths exactly as documented: without it, every route also answered with a trailing slash
  // (`POST /api/consumers/` created a consumer), which /openapi.json does not list (docs/api.md).
  const base = new Elysia({ strictPath: true })
  // Database mode: a request's waits for the database share one deadline (`Storage.requestScope`).
  // Wrapped first, so inside the observer below, which times the whole request.
  const requestScope = deps.storage.requestScope?.bind(deps.storage)
  if (requestScope) base.wrap(scopedHandlers(requestScope) as never)
  const app = base
    // Around every route's handler (src/http/observe.ts): the request log and metrics.
    .wrap(requestObserver(() => routeList(), deps.logger, deps.metrics) as never)
    .use(foundation(deps, (value, since) => deps.storage.settle(value, since), chargeAddress))
    // Only when configured: a global hook costs every request (see `withTraceId`).
    .use(deps.config.corsOrigins?.length ? cors(deps.config.corsOrigins, chargeAddress) : new Elysia())
    .get('/healthz', ({ set }) => (withTraceId(set), { status: 'ok' as const }), {
      detail: doc({ operationId: 'getHealth', summary: 'Liveness', tag: 'service', public: true, responses: { 200: HealthAnswer } }),
    })
    .use(operationsRoutes(deps))
    .get('/docs', ({ request, set }) => (withTraceId(set), chargeAddress(request, set), docsPageResponse()), {
      detail: doc({
        operationId: 'getDocsPage',
        summary: 'This document as a page',
        tag: 'service',
        public: true,
        limited: true,
        responses: { 200: { description: 'An HTML page rendering /openapi.json (served from the binary, works offline)', contentType: 'text/html' } },
      }),
    })
    .get(DOCS_SCRIPT_PATH, ({ request, set }) => (withTraceId(set), chargeAddress(request, set), docsScriptResponse()), {
      detail: doc({
        operationId: 'getDocsScript',
        summary: "The docs page's renderer",
        tag: 'service',
        public: true,
        limited: true,
        responses: { 200: { description: "Scalar's API reference, embedded in the binary", contentType: 'text/javascript' } },
      }),
    })
    .use(organizationsController(deps, organizations))
    .use(applicationsController(deps, applications))
    .use(environmentsController(deps, environments))
    .use(consumersController(deps, consumers))
    .use(installationsController(deps, installations))
    .use(enrollmentsController(deps, enrollments))
    .use(tokensController(deps, tokens))
    .use(auditController(deps, audit))
  routeList = () => app.routes
  let document: string | undefined
  // Built and serialised on first use: `serve` fills in the public URL (the `servers` entry) once it has bound its port.
  const documentResponse = () => {
    document ??= JSON.stringify(openApiDocument(app.routes, VERSION, deps.config.publicUrl))
    return new Response(document, { headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(document)) } })
  }
  return app.get('/openapi.json', ({ request, set }) => (withTraceId(set), chargeAddress(request, set), documentResponse()), {
    detail: doc({ operationId: 'getOpenApiDocument', summary: 'This document', tag: 'service', public: true, limited: true, responses: { 200: OpenApiDocumentAnswer } }),
  })
}

export type App = ReturnType<typeof routes>

type Handler = (request: Request) => unknown

/**
 * The function for `app.wrap` that runs each request's handler in `scope`. One wrapped handler per
 * handler, made once: the request observer (src/http/observe.ts) keeps what it learns of a route
 * by the handler it is given.
 */
function scopedHandlers(scope: <T>(handle: () => T) => T): (handler: Handler) => Handler {
  const scoped = new Map<Handler, Handler>()
  return (handler) => {
    let wrapped = scoped.get(handler)
    if (!wrapped) scoped.set(handler, (wrapped = (request) => scope(() => handler(request))))
    return wrapped
  }
}
