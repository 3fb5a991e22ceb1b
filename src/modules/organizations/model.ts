import * as v from 'valibot'
import type { Organization } from '../../storage/records'
import {
  AnsweredEnvironmentList,
  AnsweredEnvironmentName,
  AnsweredUuid,
  Description,
  EnvironmentList,
  EnvironmentName,
  ENVIRONMENT_NAME_FORM,
  RecordState,
  TraceId,
  Uuid,
  formatEnvironments,
  timestampFields,
  timestamps,
  rememberedView,
} from '../shared/model'

export const CreateOrganizationBody = v.object({
  description: Description,
  parent_id: v.optional(
    v.pipe(
      Uuid,
      v.description(
        "Required for vendor tokens: the vendor's own id creates a customer, a customer's id a partner of it. A customer token may leave it out or send its own id.",
      ),
    ),
  ),
  supported_environments: v.optional(
    v.pipe(
      v.object({ default: EnvironmentName, supported: EnvironmentList }),
      v.check((envs) => envs.supported.includes(envs.default), 'default must be one of supported'),
      v.description('Customers only: enables virtual environments, decided at creation only. `default` must be one of `supported`.'),
    ),
  ),
})
export type CreateOrganizationInput = v.InferOutput<typeof CreateOrganizationBody>

export const UpdateOrganizationBody = v.object({ description: Description })

/** PATCH .../environments: exactly one of `default` (set the default) or `environment` (add one). */
export const ChangeEnvironmentsBody = v.pipe(
  v.object({ default: v.optional(EnvironmentName), environment: v.optional(EnvironmentName) }),
  v.check((b) => (b.default === undefined) !== (b.environment === undefined), 'Send exactly one of default and environment'),
  // The check above, as JSON Schema says it: each branch has its key and not the other. Said with
  // `not: {required}` rather than a `false` property schema, which two zod client generators
  // (orval, openapi-zod-client) cannot read at all; the `not` declares the key it requires, as
  // Ajv's strict mode and Redocly ask (docs/api.md, "The OpenAPI document, the page and clients").
  v.metadata({
    oneOf: [
      { type: 'object', required: ['default'], properties: { default: ENVIRONMENT_NAME_FORM }, not: { required: ['environment'], properties: { environment: {} } } },
      { type: 'object', required: ['environment'], properties: { environment: ENVIRONMENT_NAME_FORM }, not: { required: ['default'], properties: { default: {} } } },
    ],
  }),
)

export const RemoveEnvironmentBody = v.object({ environment: EnvironmentName })

const OrganizationType = v.picklist(['vendor', 'customer', 'partner'])

/** List and single-view shape. */
export const OrganizationSummaryRecord = v.strictObject({
  organization_id: AnsweredUuid,
  description: v.string(),
  state: RecordState,
  ...timestampFields,
})

/** Create, update, suspend and activate shape. */
export const OrganizationRecord = v.strictObject({
  organization_id: AnsweredUuid,
  parent_id: v.pipe(v.nullable(AnsweredUuid), v.description('null for the vendor')),
  organization_type: OrganizationType,
  description: v.string(),
  state: RecordState,
  supported_environments: v.optional(
    v.pipe(
      v.strictObject({ default: AnsweredEnvironmentName, supported: AnsweredEnvironmentList }),
      v.description('Only in the answer to a create that sent it.'),
    ),
  ),
  ...timestampFields,
})

export const OrganizationListAnswer = v.strictObject({ organizations: v.array(OrganizationSummaryRecord), trace_id: TraceId })
export const OrganizationSummaryAnswer = v.strictObject({ organization: OrganizationSummaryRecord, trace_id: TraceId })
export const OrganizationAnswer = v.strictObject({ organization: OrganizationRecord, trace_id: TraceId })

const environmentSetFields = { default: AnsweredEnvironmentName, supported: AnsweredEnvironmentList, trace_id: TraceId }
/** The view and set-default answers. */
export const OrganizationEnvironmentsAnswer = v.strictObject({ organization_id: AnsweredUuid, ...environmentSetFields })
/** The add and remove answers name the organization's id `application_id` (the specification's quirk, kept). */
export const OrganizationEnvironmentsChangeAnswer = v.strictObject({
  application_id: v.pipe(AnsweredUuid, v.description("The organization's id, under this name.")),
  ...environmentSetFields,
})

export const organizationSummary = (o: Organization): v.InferOutput<typeof OrganizationSummaryRecord> => ({
  organization_id: o.organization_id,
  description: o.description,
  state: o.state,
  ...timestamps(o),
})
export const organizationSummaryText = rememberedView(organizationSummary)

/** Create, update, suspend and activate shape; `supported_environments` only when a create sent it. */
export const organizationFull = (o: Organization, withEnvironments = false): v.InferOutput<typeof OrganizationRecord> => ({
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

/**
 * An organization's environments under the id field its route names (docs/api.md). Typed by that
 * field: TypeScript widens a computed key to an index signature, and the typed client (src/client.ts)
 * then lost the id field from these answers.
 */
export const environmentSet = <IdField extends 'organization_id' | 'application_id'>(o: Organization, idField: IdField) =>
  ({
    [idField]: o.organization_id,
    default: o.environments!.default,
    supported: formatEnvironments(o.environments!.supported),
  }) as Record<IdField, string> & { default: string; supported: string }
