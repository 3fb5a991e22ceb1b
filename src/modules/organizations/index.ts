import { Elysia } from 'elysia'
import { authenticated, settled, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, findEnvironmentCustomer, findOrganization, isVendor, may, referencedId } from '../../http/access'
import type { Principal } from '../../http/auth'
import { notFound } from '../../http/errors'
import { parseBody } from '../../http/body'
import { stateChange } from '../../http/state-change'
import type { Organization } from '../../store/database'
import { doc } from '../../http/openapi'
import { OrganizationService } from './service'
import {
  ChangeEnvironmentsBody,
  CreateOrganizationBody,
  RemoveEnvironmentBody,
  UpdateOrganizationBody,
  environmentSet,
  organizationFull,
  organizationSummary,
} from './model'

export const organizationsController = (deps: AppDeps) => {
  const service = new OrganizationService(deps.store)
  const { tables } = deps.store
  const changeState = {
    param: 'organization_id',
    find: (principal: Principal, id: string) => findOrganization(tables, principal, id),
    allowed: may.changeOrganizationState,
    answer: (org: Organization) => ({ organization: organizationFull(org) }),
  }
  return new Elysia({ prefix: '/api/organizations' })
    .use(authenticated(deps))
    .get(
      '',
      ({ principal, set }) =>
        settled(deps.store, { organizations: service.list(principal).map(organizationSummary), trace_id: traceIdOf(set) }),
      { detail: doc({ summary: 'List the organizations in scope', tag: 'organizations' }) },
    )
    .get(
      '/:organization_id',
      ({ principal, params, set }) => {
        const org = findOrganization(tables, principal, params.organization_id)
        return settled(deps.store, { organization: organizationSummary(org), trace_id: traceIdOf(set) })
      },
      { detail: doc({ summary: 'View an organization', tag: 'organizations' }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        // A record the body names that does not exist is 404, before the role (403) and the body's
        // other faults (400), as for every POST. A customer's parent_id is its own id or a 400
        // (CONTRACT section 5), so only the vendor's is looked up here.
        const parentId = referencedId(body, 'parent_id')
        if (parentId !== undefined && isVendor(principal) && !tables.organizations.has(parentId)) throw notFound('Parent organization')
        authorize(may.createOrganization(principal), 'create organizations')
        const input = parseBody(CreateOrganizationBody, body)
        const org = await service.create(principal, input)
        set.status = 201
        return { organization: organizationFull(org, input.supported_environments !== undefined), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: 'Create a customer (vendor) or a partner', tag: 'organizations', body: CreateOrganizationBody, status: 201 }) },
    )
    .patch(
      '/:organization_id',
      async ({ principal, params, body, set }) => {
        const org = findOrganization(tables, principal, params.organization_id)
        authorize(may.updateOrganization(principal), 'update organizations')
        const { description } = parseBody(UpdateOrganizationBody, body)
        return { organization: organizationFull(await service.updateDescription(org, description)), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: "Update an organization's description", tag: 'organizations', body: UpdateOrganizationBody }) },
    )
    .patch(
      '/:organization_id/suspend',
      stateChange({ ...changeState, action: 'suspend this organization', change: (org) => service.setState(org, 'suspended') }),
      { ...takesBody, detail: doc({ summary: 'Suspend an organization', tag: 'organizations' }) },
    )
    .patch(
      '/:organization_id/activate',
      stateChange({ ...changeState, action: 'activate this organization', change: (org) => service.setState(org, 'active') }),
      { ...takesBody, detail: doc({ summary: 'Activate an organization', tag: 'organizations' }) },
    )
    .get(
      '/:organization_id/environments',
      ({ principal, params, set }) => {
        const org = findEnvironmentCustomer(tables, principal, params.organization_id)
        return settled(deps.store, { ...environmentSet(org, 'organization_id'), trace_id: traceIdOf(set) })
      },
      { detail: doc({ summary: "View a customer's virtual environments", tag: 'organization environments' }) },
    )
    .patch(
      '/:organization_id/environments',
      async ({ principal, params, body, set }) => {
        const org = findEnvironmentCustomer(tables, principal, params.organization_id)
        authorize(may.changeOrganizationEnvironments(principal), 'change organization environments')
        const input = parseBody(ChangeEnvironmentsBody, body)
        if (input.default !== undefined) {
          return { ...environmentSet(await service.setDefaultEnvironment(org, input.default), 'organization_id'), trace_id: traceIdOf(set) }
        }
        // SPEC.md's quirk, kept: the add answer names the organization's id `application_id`.
        return { ...environmentSet(await service.addEnvironment(org, input.environment!), 'application_id'), trace_id: traceIdOf(set) }
      },
      {
        ...takesBody,
        detail: doc({
          summary: 'Set the default environment (`default`) or add one (`environment`)',
          tag: 'organization environments',
          body: ChangeEnvironmentsBody,
        }),
      },
    )
    .delete(
      '/:organization_id/environments',
      async ({ principal, params, body, set }) => {
        const org = findEnvironmentCustomer(tables, principal, params.organization_id)
        authorize(may.changeOrganizationEnvironments(principal), 'change organization environments')
        const { environment } = parseBody(RemoveEnvironmentBody, body)
        return { ...environmentSet(await service.removeEnvironment(org, environment), 'application_id'), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: 'Remove an environment', tag: 'organization environments', body: RemoveEnvironmentBody }) },
    )
}
