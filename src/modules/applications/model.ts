import * as v from 'valibot'
import type { Application, Organization } from '../../storage/records'
import { Description, EnvironmentList, Uuid, formatEnvironments, timestamps } from '../shared/model'

export const CreateApplicationBody = v.object({
  organization_id: Uuid,
  description: Description,
  application_id: v.optional(Uuid),
  allowed_environments: v.optional(EnvironmentList),
})
export type CreateApplicationInput = v.InferOutput<typeof CreateApplicationBody>

export const UpdateApplicationBody = v.object({ description: Description })

/** `allowed_environments` is omitted when the owning customer is not enabled for virtual environments. */
export const applicationView = (a: Application, customer: Organization) => ({
  application_id: a.application_id,
  organization_id: a.organization_id,
  description: a.description,
  ...(customer.environments ? { allowed_environments: formatEnvironments(a.environments) } : {}),
  state: a.state,
  ...timestamps(a),
})
