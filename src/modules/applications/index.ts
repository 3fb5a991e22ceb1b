import { Elysia } from 'elysia'
import { actorOf, authenticated, readRoutes, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, createBody, customerNamed, findOwned } from '../../http/access'
import { may } from '../shared/scope'
import { parseBody } from '../../http/body'
import { stateChange } from '../../http/state-change'
import { doc } from '../../http/openapi'
import type { Application, Organization } from '../../storage/records'
import { all, then, type Maybe } from '../../storage/storage'
import { sliceOf, type Principal } from '../shared/principal'
import type { ApplicationService } from './service'
import { ApplicationAnswer, ApplicationListAnswer, CreateApplicationBody, CreatedApplicationAnswer, UpdateApplicationBody, applicationView } from './model'

export const applicationsController = (deps: AppDeps, service: ApplicationService) => {
  const { storage } = deps
  const read = readRoutes(deps)
  /** The view needs the owning customer (whether it has virtual environments). */
  const view = (app: Application): Maybe<ReturnType<typeof applicationView>> =>
    then(storage.find('organizations', app.organization_id), (customer) => applicationView(app, customer as Organization))
  const find = (principal: Principal, id: string) => findOwned(storage, 'applications', principal, id, 'application_id', 'Application')
  const changeState = {
    param: 'application_id',
    find,
    allowed: may.changeApplications,
    answer: (app: Application) => then(view(app), (application) => ({ application })),
  }

  return new Elysia({ prefix: '/api/applications' })
    .use(authenticated(deps))
    .get(
      '',
      read(({ principal, set }) =>
          then(service.list(principal, sliceOf(principal)), (apps) => then(all(apps.map(view)), (applications) => ({ applications, trace_id: traceIdOf(set) })))),
      { detail: doc({ operationId: 'listApplications', summary: 'List the applications in scope', tag: 'applications', responses: { 200: ApplicationListAnswer } }) },
    )
    .get(
      '/:application_id',
      read(({ principal, params, set }) =>
        then(then(find(principal, params.application_id!), view), (application) => ({ application, trace_id: traceIdOf(set) }))),
      { detail: doc({ operationId: 'getApplication', summary: 'View an application', tag: 'applications', responses: { 200: ApplicationAnswer } }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        const input = await createBody(storage, principal, body, may.changeApplications(principal), 'register applications', CreateApplicationBody)
        const customer = await customerNamed(storage, principal, input.organization_id)
        const { application, apiKey } = await service.create(customer, input, actorOf(principal, set))
        set.status = 201
        set.headers['cache-control'] = 'no-store' // the answer carries the api_key, shown this once
        return {
          application: { ...applicationView(application, customer), host_url: deps.config.publicUrl, api_key: apiKey },
          trace_id: traceIdOf(set),
        }
      },
      { ...takesBody, detail: doc({
          operationId: 'createApplication',
          summary: 'Register an application of a customer',
          tag: 'applications',
          body: CreateApplicationBody,
          responses: { 201: CreatedApplicationAnswer },
          shownOnce: true,
          errors: [403, 404, 409],
        }) },
    )
    .patch(
      '/:application_id',
      async ({ principal, params, body, set }) => {
        const app = await find(principal, params.application_id)
        authorize(may.changeApplications(principal), 'change applications')
        const { description } = parseBody(UpdateApplicationBody, body)
        return { application: await view(await service.updateDescription(app, description, actorOf(principal, set))), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'updateApplication',
          summary: "Update an application's description",
          tag: 'applications',
          body: UpdateApplicationBody,
          responses: { 200: ApplicationAnswer },
          errors: [403],
        }) },
    )
    .patch(
      '/:application_id/suspend',
      stateChange({ ...changeState, action: 'suspend applications', change: (app, actor) => service.setState(app, 'suspended', actor) }),
      { ...takesBody, detail: doc({ operationId: 'suspendApplication', summary: 'Suspend an application', tag: 'applications', responses: { 200: ApplicationAnswer }, errors: [403, 409] }) },
    )
    .patch(
      '/:application_id/activate',
      stateChange({ ...changeState, action: 'activate applications', change: (app, actor) => service.setState(app, 'active', actor) }),
      { ...takesBody, detail: doc({ operationId: 'activateApplication', summary: 'Activate an application', tag: 'applications', responses: { 200: ApplicationAnswer }, errors: [403, 409] }) },
    )
}
