import { Elysia } from 'elysia'
import { actorOf, authenticated, readRoutes, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, findOwned } from '../../http/access'
import { may } from '../shared/scope'
import type { Principal } from '../shared/principal'
import { notFound } from '../shared/errors'
import { parseBody } from '../../http/body'
import { doc } from '../../http/openapi'
import { then } from '../../storage/storage'
import type { EnvironmentService } from './service'
import { ApplicationEnvironmentsAddAnswer, ApplicationEnvironmentsAnswer, EnvironmentBody, applicationEnvironments } from './model'

export const environmentsController = (deps: AppDeps, service: EnvironmentService) => {
  const { storage } = deps
  const read = readRoutes(deps)

  /** These endpoints exist only for customers enabled for virtual environments (404 otherwise). */
  const find = (principal: Principal, id: string) =>
    then(findOwned(storage, 'applications', principal, id, 'application_id', 'Application'), (app) =>
      then(storage.find('organizations', app.organization_id), (customer) => {
        if (!customer!.environments) throw notFound('Application environments')
        return { app, customer: customer! }
      }),
    )

  return new Elysia({ prefix: '/api/environments' })
    .use(authenticated(deps))
    .get(
      '/:application_id',
      read(({ principal, params, set }) =>
        then(find(principal, params.application_id!), ({ app }) => ({ ...applicationEnvironments(app), trace_id: traceIdOf(set) }))),
      { detail: doc({
          operationId: 'getApplicationEnvironments',
          summary: "View an application's environments",
          tag: 'application environments',
          responses: { 200: ApplicationEnvironmentsAnswer },
        }) },
    )
    .post(
      '/:application_id',
      async ({ principal, params, body, set }) => {
        const { app, customer } = await find(principal, params.application_id)
        authorize(may.changeApplications(principal), "change an application's environments")
        const { environment } = parseBody(EnvironmentBody, body)
        const changed = await service.add(app, customer, environment, actorOf(principal, set))
        return {
          ...applicationEnvironments(changed),
          message: `Environment ${environment} added to application ${changed.application_id}.`,
          trace_id: traceIdOf(set),
        }
      },
      { ...takesBody, detail: doc({
          operationId: 'addApplicationEnvironment',
          summary: 'Add an environment to an application',
          tag: 'application environments',
          body: EnvironmentBody,
          responses: { 200: ApplicationEnvironmentsAddAnswer },
          errors: [403, 409],
        }) },
    )
    .delete(
      '/:application_id',
      async ({ principal, params, body, set }) => {
        const { app } = await find(principal, params.application_id)
        authorize(may.changeApplications(principal), "change an application's environments")
        const { environment } = parseBody(EnvironmentBody, body)
        return { ...applicationEnvironments(await service.remove(app, environment, actorOf(principal, set))), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'removeApplicationEnvironment',
          summary: 'Remove an environment from an application',
          tag: 'application environments',
          body: EnvironmentBody,
          responses: { 200: ApplicationEnvironmentsAnswer },
          errors: [403, 409],
        }) },
    )
}
