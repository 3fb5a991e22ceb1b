import * as v from 'valibot'
import type { Application, Organization } from '../../storage/records'
import {
  AnsweredEnvironmentList,
  AnsweredUuid,
  Description,
  EnvironmentList,
  RecordState,
  TraceId,
  Uuid,
  formatEnvironments,
  timestampFields,
  timestamps,
} from '../shared/model'

export const CreateApplicationBody = v.object({
  organization_id: v.pipe(Uuid, v.description('The customer the application is registered to.')),
  description: Description,
  application_id: v.optional(v.pipe(Uuid, v.description('Used when no application has it yet; otherwise a random id is assigned.'))),
  allowed_environments: v.optional(
    v.pipe(EnvironmentList, v.description("Each in the customer's supported environments; absent: the customer's default.")),
  ),
})
export type CreateApplicationInput = v.InferOutput<typeof CreateApplicationBody>

export const UpdateApplicationBody = v.object({ description: Description })

const applicationFields = {
  application_id: AnsweredUuid,
  organization_id: AnsweredUuid,
  description: v.string(),
  allowed_environments: v.optional(
    v.pipe(AnsweredEnvironmentList, v.description('Omitted when the customer is not enabled for virtual environments.')),
  ),
  state: RecordState,
  ...timestampFields,
}
export const ApplicationRecord = v.strictObject(applicationFields)
/** The answer to a create also carries the client configuration, shown this once. */
export const CreatedApplicationRecord = v.strictObject({
  ...applicationFields,
  host_url: v.pipe(v.string(), v.description('The address the application uses (the server\'s public URL).')),
  api_key: v.pipe(v.string(), v.description('A new secret, shown this once and kept only as a hash.')),
})

export const ApplicationListAnswer = v.strictObject({ applications: v.array(ApplicationRecord), trace_id: TraceId })
export const ApplicationAnswer = v.strictObject({ application: ApplicationRecord, trace_id: TraceId })
export const CreatedApplicationAnswer = v.strictObject({ application: CreatedApplicationRecord, trace_id: TraceId })

/** `allowed_environments` is omitted when the owning customer is not enabled for virtual environments. */
export const applicationView = (a: Application, customer: Organization): v.InferOutput<typeof ApplicationRecord> => ({
  application_id: a.application_id,
  organization_id: a.organization_id,
  description: a.description,
  ...(customer.environments ? { allowed_environments: formatEnvironments(a.environments) } : {}),
  state: a.state,
  ...timestamps(a),
})
