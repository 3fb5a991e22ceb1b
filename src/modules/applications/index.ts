import { Elysia } from 'elysia'
import { authenticated, settled, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, checkNamedOrganization, customerNamed, findOwned, may } from '../../http/access'
import { parseBody } from '../../http/body'
import { stateChange } from '../../http/state-change'
import { doc } from '../../http/openapi'
import type { Application } from '../../store/database'
import { ApplicationService } from './service'
import { CreateApplicationBody, UpdateApplicationBody, applicationView } from './model'

export const applicationsController = (deps: AppDeps) => {
  const service = new ApplicationService(deps.store)
  const { tables } = deps.store
  const view = (app: Application) => applicationView(app, tables.organizations.get(app.organization_id)!)
  const find = (principal: Parameters<typeof findOwned>[1], id: string) =>
    findOwned(tables.applications, principal, id, 'application_id', 'Application')
  const changeState = { param: 'application_id', find, allowed: may.changeApplications, answer: (app: Application) => ({ application: view(app) }) }

  return new Elysia({ prefix: '/api/applications' })
    .use(authenticated(deps))
    .get(
      '',
      ({ principal, set }) => {
        const ids = principal.customerId === null ? tables.applications.ids() : tables.applications.idsBy('organization', principal.customerId)
        return settled(deps.store, { applications: ids.map((id) => view(tables.applications.get(id)!)), trace_id: traceIdOf(set) })
      },
      { detail: doc({ summary: 'List the applications in scope', tag: 'applications' }) },
    )
    .get(
      '/:application_id',
      ({ principal, params, set }) =>
        settled(deps.store, { application: view(find(principal, params.application_id)), trace_id: traceIdOf(set) }),
      { detail: doc({ summary: 'View an application', tag: 'applications' }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        checkNamedOrganization(tables, principal, body)
        authorize(may.changeApplications(principal), 'register applications')
        const input = parseBody(CreateApplicationBody, body)
        const customer = customerNamed(tables, principal, input.organization_id)
        const { application, apiKey } = await service.create(customer, input)
        set.status = 201
        set.headers['cache-control'] = 'no-store' // the answer carries the api_key, shown this once
        return {
          application: { ...applicationView(application, customer), host_url: deps.config.publicUrl, api_key: apiKey },
          trace_id: traceIdOf(set),
        }
      },
      { ...takesBody, detail: doc({ summary: 'Register an application of a customer', tag: 'applications', body: CreateApplicationBody, status: 201 }) },
    )
    .patch(
      '/:application_id',
      async ({ principal, params, body, set }) => {
        const app = find(principal, params.application_id)
        authorize(may.changeApplications(principal), 'change applications')
        const { description } = parseBody(UpdateApplicationBody, body)
        return { application: view(await service.updateDescription(app, description)), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: "Update an application's description", tag: 'applications', body: UpdateApplicationBody }) },
    )
    .patch(
      '/:application_id/suspend',
      stateChange({ ...changeState, action: 'suspend applications', change: (app) => service.setState(app, 'suspended') }),
      { ...takesBody, detail: doc({ summary: 'Suspend an application', tag: 'applications' }) },
    )
    .patch(
      '/:application_id/activate',
      stateChange({ ...changeState, action: 'activate applications', change: (app) => service.setState(app, 'active') }),
      { ...takesBody, detail: doc({ summary: 'Activate an application', tag: 'applications' }) },
    )
}
