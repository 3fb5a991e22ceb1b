/**
 * The Elysia app, without listening: `serve` binds it, tests call `app.handle(request)` directly.
 */
import { Elysia } from 'elysia'
import { foundation, withTraceId } from './http/foundation'
import { doc, openApiDocument } from './http/openapi'
import type { AppDeps } from './http/context'
import { organizationsController } from './modules/organizations'
import { applicationsController } from './modules/applications'
import { environmentsController } from './modules/environments'
import { consumersController } from './modules/consumers'
import { installationsController } from './modules/installations'
import { enrollmentsController } from './modules/enrollments'
import { tokensController } from './modules/tokens'
import { auditController } from './modules/audit'
import { TokenService } from './modules/tokens/service'
import { ConsumerService } from './modules/consumers/service'
import { InstallationService } from './modules/installations/service'
import { EnrollmentService } from './modules/enrollments/service'
import { VERSION } from './version'

export function createApp(deps: AppDeps, log: (line: string) => void = (line) => console.error(line)) {
  const consumers = new ConsumerService(deps.storage)
  const installations = new InstallationService(deps.storage, deps.config.autoVerifyInstallations)
  const enrollments = new EnrollmentService(deps.storage, installations)
  const tokens = new TokenService(deps.storage)
  const app = new Elysia()
    .use(foundation(log))
    .get('/healthz', ({ set }) => (withTraceId(set), { status: 'ok' }), { detail: doc({ summary: 'Liveness', tag: 'service', public: true }) })
    .use(organizationsController(deps))
    .use(applicationsController(deps))
    .use(environmentsController(deps))
    .use(consumersController(deps, consumers))
    .use(installationsController(deps, installations))
    .use(enrollmentsController(deps, enrollments))
    .use(tokensController(deps, tokens))
    .use(auditController(deps))
  let document: unknown
  return app.get('/openapi.json', ({ set }) => (withTraceId(set), (document ??= openApiDocument(app.routes, VERSION))), {
    detail: doc({ summary: 'This document', tag: 'service', public: true }),
  })
}

export type App = ReturnType<typeof createApp>
