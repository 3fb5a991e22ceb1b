import { Elysia } from 'elysia'
import { authenticated, settled, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, findOwned, may } from '../../http/access'
import type { Principal } from '../../http/auth'
import { notFound } from '../../http/errors'
import { parseBody } from '../../http/body'
import { doc } from '../../http/openapi'
import { EnvironmentService } from './service'
import { EnvironmentBody, applicationEnvironments } from './model'

export const environmentsController = (deps: AppDeps) => {
  const service = new EnvironmentService(deps.store)
  const { tables } = deps.store

  /** These endpoints exist only for customers enabled for virtual environments (404 otherwise). */
  const find = (principal: Principal, id: string) => {
    const app = findOwned(tables.applications, principal, id, 'application_id', 'Application')
    const customer = tables.organizations.get(app.organization_id)!
    if (!customer.environments) throw notFound('Application environments')
    return { app, customer }
  }

  return new Elysia({ prefix: '/api/environments' })
    .use(authenticated(deps))
    .get(
      '/:application_id',
      ({ principal, params, set }) =>
        settled(deps.store, { ...applicationEnvironments(find(principal, params.application_id).app), trace_id: traceIdOf(set) }),
      { detail: doc({ summary: "View an application's environments", tag: 'application environments' }) },
    )
    .post(
      '/:application_id',
      async ({ principal, params, body, set }) => {
        const { app, customer } = find(principal, params.application_id)
        authorize(may.changeApplications(principal), "change an application's environments")
        const { environment } = parseBody(EnvironmentBody, body)
        const changed = await service.add(app, customer, environment)
        return {
          ...applicationEnvironments(changed),
          message: `Environment ${environment} added to application ${changed.application_id}.`,
          trace_id: traceIdOf(set),
        }
      },
      { ...takesBody, detail: doc({ summary: 'Add an environment to an application', tag: 'application environments', body: EnvironmentBody }) },
    )
    .delete(
      '/:application_id',
      async ({ principal, params, body, set }) => {
        const { app } = find(principal, params.application_id)
        authorize(may.changeApplications(principal), "change an application's environments")
        const { environment } = parseBody(EnvironmentBody, body)
        return { ...applicationEnvironments(await service.remove(app, environment)), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: 'Remove an environment from an application', tag: 'application environments', body: EnvironmentBody }) },
    )
}
