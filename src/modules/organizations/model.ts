import * as v from 'valibot'
import type { Organization } from '../../storage/records'
import { Description, EnvironmentList, EnvironmentName, Uuid, formatEnvironments, timestamps } from '../shared/model'

export const CreateOrganizationBody = v.object({
  description: Description,
  parent_id: v.optional(Uuid),
  supported_environments: v.optional(
    v.pipe(
      v.object({ default: EnvironmentName, supported: EnvironmentList }),
      v.check((envs) => envs.supported.includes(envs.default), 'default must be one of supported'),
    ),
  ),
})
export type CreateOrganizationInput = v.InferOutput<typeof CreateOrganizationBody>

export const UpdateOrganizationBody = v.object({ description: Description })

/** PATCH .../environments: exactly one of `default` (set the default) or `environment` (add one). */
export const ChangeEnvironmentsBody = v.pipe(
  v.object({ default: v.optional(EnvironmentName), environment: v.optional(EnvironmentName) }),
  v.check((b) => (b.default === undefined) !== (b.environment === undefined), 'Send exactly one of default and environment'),
)

export const RemoveEnvironmentBody = v.object({ environment: EnvironmentName })

/** List and single-view shape. */
export const organizationSummary = (o: Organization) => ({
  organization_id: o.organization_id,
  description: o.description,
  state: o.state,
  ...timestamps(o),
})

/** Create, update, suspend and activate shape; `supported_environments` only when a create sent it. */
export const organizationFull = (o: Organization, withEnvironments = false) => ({
  organization_id: o.organization_id,
  parent_id: o.parent_id,
  organization_type: o.organization_type,
  description: o.description,
  state: o.state,
  ...(withEnvironments && o.environments
    ? { supported_environments: { default: o.environments.default, supported: formatEnvironments(o.environments.supported) } }
    : {}),
  ...timestamps(o),
})

export const environmentSet = (o: Organization, idField: 'organization_id' | 'application_id') => ({
  [idField]: o.organization_id,
  default: o.environments!.default,
  supported: formatEnvironments(o.environments!.supported),
})
