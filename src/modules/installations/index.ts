import { Elysia } from 'elysia'
import { actorOf, authenticated, listAnswer, readRoutes, recordAnswer, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, createBody, findOwned, owningCustomer } from '../../http/access'
import { may } from '../shared/scope'
import { sliceOf, type Principal } from '../shared/principal'
import { parseBody, parseQuery } from '../../http/body'
import { stateChange } from '../../http/state-change'
import type { Installation } from '../../storage/records'
import { then } from '../../storage/storage'
import { doc } from '../../http/openapi'
import type { InstallationService } from './service'
import { CreateInstallationBody, InstallationAnswer, InstallationListAnswer, InstallationListQuery, UpdateInstallationBody, installationText, installationView } from './model'

export const installationsController = (deps: AppDeps, service: InstallationService) => {
  const { storage } = deps
  const read = readRoutes(deps)
  const find = (principal: Principal, id: string) => findOwned(storage, 'installations', principal, id, 'installation_id', 'Installation')
  const changeState = {
    param: 'installation_id',
    find,
    allowed: may.changeTenantData,
    answer: (installation: Installation) => ({ installation: installationView(installation) }),
  }

  return new Elysia({ prefix: '/api/installations' })
    .use(authenticated(deps))
    .get(
      '',
      read(({ principal, request, set }) => {
        const q = parseQuery(InstallationListQuery, request)
        // docs/api.md "Installations": the paged shape only when `page` is sent; otherwise the records and a trace_id.
        const slice = sliceOf(principal)
        const answer = then(service.list(principal, q, slice), ({ items, total }) =>
          q.page
            ? listAnswer('installations', items, installationText, { total, page: q.page, page_size: q.page_size }, slice)
            : listAnswer('installations', items, installationText, { trace_id: traceIdOf(set) }, slice))
        return answer
      }),
      { detail: doc({
          operationId: 'listInstallations',
          summary: 'List installations',
          description: 'Paged shape (`total`, `page`, `page_size`) when `page` is sent; otherwise the records (at most `page_size`) and a `trace_id`.',
          tag: 'installations',
          query: InstallationListQuery,
          responses: { 200: InstallationListAnswer },
        }) },
    )
    .get(
      '/:installation_id',
      read(({ principal, params, set }) =>
        then(find(principal, params.installation_id!), (installation) => recordAnswer(set, 'installation', installationText(installation)))),
      { detail: doc({ operationId: 'getInstallation', summary: 'View an installation', tag: 'installations', responses: { 200: InstallationAnswer } }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        const input = await createBody(storage, principal, body, may.changeTenantData(principal), 'create installations', CreateInstallationBody)
        const customer = await owningCustomer(storage, principal, input.organization_id)
        const { record, created } = await service.create(customer, input.installation_id, input.description, actorOf(principal, set))
        set.status = created ? 201 : 200
        return { installation: installationView(record), trace_id: traceIdOf(set) }
      },
      {
        ...takesBody,
        detail: doc({
          operationId: 'createInstallation',
          summary: 'Create an installation (or return the existing one)',
          description: '201 with the new installation; 200 with the existing one, unchanged, when the caller\'s customer already has this id.',
          tag: 'installations',
          body: CreateInstallationBody,
          responses: { 201: InstallationAnswer, 200: InstallationAnswer },
          errors: [403, 404, 409],
        }),
      },
    )
    .patch(
      '/:installation_id',
      async ({ principal, params, body, set }) => {
        const installation = await find(principal, params.installation_id)
        authorize(may.changeTenantData(principal), 'change installations')
        const { description } = parseBody(UpdateInstallationBody, body)
        return { installation: installationView(await service.updateDescription(installation, description, actorOf(principal, set))), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'updateInstallation',
          summary: "Update an installation's description",
          tag: 'installations',
          body: UpdateInstallationBody,
          responses: { 200: InstallationAnswer },
          errors: [403],
        }) },
    )
    .patch(
      '/:installation_id/suspend',
      stateChange({ ...changeState, action: 'suspend installations', change: (installation, actor) => service.suspend(installation, actor) }),
      { ...takesBody, detail: doc({ operationId: 'suspendInstallation', summary: 'Suspend an installation', tag: 'installations', responses: { 200: InstallationAnswer }, errors: [403, 409] }) },
    )
    .patch(
      '/:installation_id/verify',
      stateChange({ ...changeState, action: 'verify installations', change: (installation, actor) => service.verify(installation, actor) }),
      { ...takesBody, detail: doc({ operationId: 'verifyInstallation', summary: 'Verify an installation', tag: 'installations', responses: { 200: InstallationAnswer }, errors: [403, 409] }) },
    )
}
