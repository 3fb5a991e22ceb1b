import { Elysia } from 'elysia'
import * as v from 'valibot'
import { actorOf, authenticated, listAnswer, readRoutes, recordAnswer, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, checkNamedOrganization, findEnvironmentCustomer, findOrganization, namedRecordFirst } from '../../http/access'
import { isCustomer, may } from '../shared/scope'
import { sliceOf, type Principal } from '../shared/principal'
import { parseBody } from '../../http/body'
import { stateChange } from '../../http/state-change'
import type { Organization } from '../../storage/records'
import { then } from '../../storage/storage'
import { doc } from '../../http/openapi'
import type { OrganizationService } from './service'
import { ChangeEnvironmentsBody, CreateOrganizationBody, OrganizationAnswer, OrganizationEnvironmentsAnswer, OrganizationEnvironmentsChangeAnswer, OrganizationListAnswer, OrganizationSummaryAnswer, RemoveEnvironmentBody, UpdateOrganizationBody, environmentSet, organizationFull, organizationSummaryText } from './model'

export const organizationsController = (deps: AppDeps, service: OrganizationService) => {
  const { storage } = deps
  const read = readRoutes(deps)
  const changeState = {
    param: 'organization_id',
    find: (principal: Principal, id: string) => findOrganization(storage, principal, id),
    allowed: may.changeOrganizationState,
    answer: (org: Organization) => ({ organization: organizationFull(org) }),
  }
  return new Elysia({ prefix: '/api/organizations' })
    .use(authenticated(deps))
    .get(
      '',
      read(({ principal, set }) => {
        const slice = sliceOf(principal)
        return then(service.list(principal, slice), (orgs) => listAnswer('organizations', orgs, organizationSummaryText, { trace_id: traceIdOf(set) }, slice))
      }),
      { detail: doc({ operationId: 'listOrganizations', summary: 'List the organizations in scope', tag: 'organizations', responses: { 200: OrganizationListAnswer } }) },
    )
    .get(
      '/:organization_id',
      read(({ principal, params, set }) =>
        then(findOrganization(storage, principal, params.organization_id!), (org) => recordAnswer(set, 'organization', organizationSummaryText(org)))),
      { detail: doc({ operationId: 'getOrganization', summary: 'View an organization', tag: 'organizations', responses: { 200: OrganizationSummaryAnswer } }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        // A record the body names that does not exist is 404, before the role (403) and the body's
        // other faults (400), as for every POST; the service's transaction finds the parent when
        // they pass. A customer's parent_id is its own id or a 400 (docs/api.md "Organizations"), so only
        // the vendor's and a partner's are looked up here: a partner may name itself and its
        // customer, as for the owner of any new record; anything else is out of its scope.
        const parentExists = () => (isCustomer(principal) ? undefined : checkNamedOrganization(storage, principal, body, 'parent_id', 'Parent organization'))
        const input = await namedRecordFirst(parentExists, () => {
          authorize(may.createOrganization(principal), 'create organizations')
          return parseBody(CreateOrganizationBody, body)
        })
        const org = await service.create(principal, input, actorOf(principal, set))
        set.status = 201
        return { organization: organizationFull(org, input.supported_environments !== undefined), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'createOrganization',
          summary: 'Create a customer (vendor) or a partner',
          tag: 'organizations',
          body: CreateOrganizationBody,
          responses: { 201: OrganizationAnswer },
          errors: [403, 404, 409],
        }) },
    )
    .patch(
      '/:organization_id',
      async ({ principal, params, body, set }) => {
        const org = await findOrganization(storage, principal, params.organization_id)
        authorize(may.updateOrganization(principal), 'update organizations')
        const { description } = parseBody(UpdateOrganizationBody, body)
        return { organization: organizationFull(await service.updateDescription(org, description, actorOf(principal, set))), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'updateOrganization',
          summary: "Update an organization's description",
          tag: 'organizations',
          body: UpdateOrganizationBody,
          responses: { 200: OrganizationAnswer },
          errors: [403],
        }) },
    )
    .patch(
      '/:organization_id/suspend',
      stateChange({ ...changeState, action: 'suspend this organization', change: (org, actor) => service.setState(org, 'suspended', actor) }),
      { ...takesBody, detail: doc({ operationId: 'suspendOrganization', summary: 'Suspend an organization', tag: 'organizations', responses: { 200: OrganizationAnswer }, errors: [403, 409] }) },
    )
    .patch(
      '/:organization_id/activate',
      stateChange({ ...changeState, action: 'activate this organization', change: (org, actor) => service.setState(org, 'active', actor) }),
      { ...takesBody, detail: doc({ operationId: 'activateOrganization', summary: 'Activate an organization', tag: 'organizations', responses: { 200: OrganizationAnswer }, errors: [403, 409] }) },
    )
    .get(
      '/:organization_id/environments',
      read(({ principal, params, set }) =>
        then(findEnvironmentCustomer(storage, principal, params.organization_id!), (org) => ({ ...environmentSet(org, 'organization_id'), trace_id: traceIdOf(set) }))),
      { detail: doc({
          operationId: 'getOrganizationEnvironments',
          summary: "View a customer's virtual environments",
          tag: 'organization environments',
          responses: { 200: OrganizationEnvironmentsAnswer },
        }) },
    )
    .patch(
      '/:organization_id/environments',
      async ({ principal, params, body, set }) => {
        const org = await findEnvironmentCustomer(storage, principal, params.organization_id)
        authorize(may.changeOrganizationEnvironments(principal), 'change organization environments')
        const input = parseBody(ChangeEnvironmentsBody, body)
        if (input.default !== undefined) {
          return { ...environmentSet(await service.setDefaultEnvironment(org, input.default, actorOf(principal, set)), 'organization_id'), trace_id: traceIdOf(set) }
        }
        // A quirk of the specification, kept (docs/api.md "Organization environments"): the add answer names the organization's id `application_id`.
        return { ...environmentSet(await service.addEnvironment(org, input.environment!, actorOf(principal, set)), 'application_id'), trace_id: traceIdOf(set) }
      },
      {
        ...takesBody,
        detail: doc({
          operationId: 'changeOrganizationEnvironments',
          summary: 'Set the default environment (`default`) or add one (`environment`)',
          description: 'The answer to setting the default carries `organization_id`; the answer to an add names the same id `application_id`.',
          tag: 'organization environments',
          body: ChangeEnvironmentsBody,
          responses: { 200: v.union([OrganizationEnvironmentsAnswer, OrganizationEnvironmentsChangeAnswer]) },
          errors: [403, 409],
        }),
      },
    )
    .delete(
      '/:organization_id/environments',
      async ({ principal, params, body, set }) => {
        const org = await findEnvironmentCustomer(storage, principal, params.organization_id)
        authorize(may.changeOrganizationEnvironments(principal), 'change organization environments')
        const { environment } = parseBody(RemoveEnvironmentBody, body)
        return { ...environmentSet(await service.removeEnvironment(org, environment, actorOf(principal, set)), 'application_id'), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'removeOrganizationEnvironment',
          summary: 'Remove an environment',
          tag: 'organization environments',
          body: RemoveEnvironmentBody,
          responses: { 200: OrganizationEnvironmentsChangeAnswer },
          errors: [403, 409],
        }) },
    )
}
