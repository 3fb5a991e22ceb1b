import * as v from 'valibot'
import type { Installation } from '../../storage/records'
import { AnsweredUuid, Description, oneQueryChoice, SearchText, StateList, TraceId, Uuid, UuidList, pageFields, pagingQuery, rememberedView, timestampFields, timestamps } from '../shared/model'
import { OwningCustomer } from '../consumers/model'

export const CreateInstallationBody = v.object({
  installation_id: Uuid,
  description: Description,
  organization_id: OwningCustomer,
})

export const UpdateInstallationBody = v.object({ description: Description })

export const InstallationListQuery = v.object({
  organization_ids: UuidList,
  consumer_ids: UuidList,
  installation_ids: UuidList,
  installation_description: v.optional(SearchText('installation_description')),
  installation_desc_search_mode: v.optional(
    oneQueryChoice('installation_desc_search_mode', ['exact', 'contains', 'startswith']),
    'exact',
  ),
  application_ids: UuidList,
  enrollment_ids: UuidList,
  /** `active` means unregistered or verified (docs/api.md, "Lists and paging"). */
  state: StateList(['active', 'suspended', 'unregistered', 'verified']),
  ...pagingQuery,
})
export type InstallationListInput = v.InferOutput<typeof InstallationListQuery>

export const InstallationRecord = v.strictObject({
  installation_id: AnsweredUuid,
  description: v.string(),
  state: v.picklist(['unregistered', 'verified', 'suspended']),
  ...timestampFields,
})
export const InstallationAnswer = v.strictObject({ installation: InstallationRecord, trace_id: TraceId })
/** Two shapes (the specification's): paged when `page` was sent, otherwise the records and a trace_id. */
export const InstallationListAnswer = v.union([
  v.pipe(v.strictObject({ installations: v.array(InstallationRecord), ...pageFields }), v.title('Paged (page sent)')),
  v.pipe(v.strictObject({ installations: v.array(InstallationRecord), trace_id: TraceId }), v.title('Unpaged (no page sent)')),
])

export const installationView = (i: Installation): v.InferOutput<typeof InstallationRecord> => ({
  installation_id: i.installation_id,
  description: i.description,
  state: i.state,
  ...timestamps(i),
})
export const installationText = rememberedView(installationView)
