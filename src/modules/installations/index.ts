import { Elysia } from 'elysia'
import { authenticated, settled, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, checkNamedOrganization, findOwned, may, owningCustomer } from '../../http/access'
import type { Principal } from '../../http/auth'
import { parseBody, parseQuery } from '../../http/body'
import { stateChange } from '../../http/state-change'
import type { Installation } from '../../store/database'
import { doc } from '../../http/openapi'
import type { InstallationService } from './service'
import { CreateInstallationBody, InstallationListQuery, UpdateInstallationBody, installationView } from './model'

export const installationsController = (deps: AppDeps, service: InstallationService) => {
  const { tables } = deps.store
  const find = (principal: Principal, id: string) => findOwned(tables.installations, principal, id, 'installation_id', 'Installation')
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
      ({ principal, request, set }) => {
        const q = parseQuery(InstallationListQuery, request)
        const { items, total } = service.list(principal, q)
        const installations = items.map(installationView)
        // SPEC.md: the paged shape only when `page` is sent; otherwise the records and a trace_id.
        const answer = q.page
          ? { installations, total, page: q.page, page_size: q.page_size }
          : { installations, trace_id: traceIdOf(set) }
        return settled(deps.store, answer)
      },
      { detail: doc({ summary: 'List installations', tag: 'installations', query: InstallationListQuery }) },
    )
    .get(
      '/:installation_id',
      ({ principal, params, set }) =>
        settled(deps.store, { installation: installationView(find(principal, params.installation_id)), trace_id: traceIdOf(set) }),
      { detail: doc({ summary: 'View an installation', tag: 'installations' }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        checkNamedOrganization(tables, principal, body)
        authorize(may.changeTenantData(principal), 'create installations')
        const input = parseBody(CreateInstallationBody, body)
        const customer = owningCustomer(tables, principal, input.organization_id)
        const { record, created } = await service.create(customer, input.installation_id, input.description)
        set.status = created ? 201 : 200
        return { installation: installationView(record), trace_id: traceIdOf(set) }
      },
      {
        ...takesBody,
        detail: doc({ summary: 'Create an installation (or return the existing one)', tag: 'installations', body: CreateInstallationBody, status: 201 }),
      },
    )
    .patch(
      '/:installation_id',
      async ({ principal, params, body, set }) => {
        const installation = find(principal, params.installation_id)
        authorize(may.changeTenantData(principal), 'change installations')
        const { description } = parseBody(UpdateInstallationBody, body)
        return { installation: installationView(await service.updateDescription(installation, description)), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: "Update an installation's description", tag: 'installations', body: UpdateInstallationBody }) },
    )
    .patch(
      '/:installation_id/suspend',
      stateChange({ ...changeState, action: 'suspend installations', change: (installation) => service.suspend(installation) }),
      { ...takesBody, detail: doc({ summary: 'Suspend an installation', tag: 'installations' }) },
    )
    .patch(
      '/:installation_id/verify',
      stateChange({ ...changeState, action: 'verify installations', change: (installation) => service.verify(installation) }),
      { ...takesBody, detail: doc({ summary: 'Verify an installation', tag: 'installations' }) },
    )
}
