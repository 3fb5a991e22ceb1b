/**
 * The Elysia app, without listening: `serve` binds it, tests call `app.handle(request)` directly.
 */
import { Elysia } from 'elysia'
import { foundation } from './http/foundation'
import { doc, openApiDocument } from './http/openapi'
import type { AppDeps } from './http/context'
import { organizationsController } from './modules/organizations'
import { VERSION } from './version'

export function createApp(deps: AppDeps, log: (line: string) => void = (line) => console.error(line)) {
  const app = new Elysia()
    .use(foundation(log))
    .get('/healthz', () => ({ status: 'ok' }), { detail: doc({ summary: 'Liveness', tag: 'service', public: true }) })
    .use(organizationsController(deps))
  let document: unknown
  return app.get('/openapi.json', () => (document ??= openApiDocument(app.routes, VERSION)), {
    detail: doc({ summary: 'This document', tag: 'service', public: true }),
  })
}

export type App = ReturnType<typeof createApp>
