import * as v from 'valibot'
import type { Installation } from '../../storage/records'
import { Description, Uuid, UuidList, pagingQuery, timestamps } from '../shared/model'

export const CreateInstallationBody = v.object({
  installation_id: Uuid,
  description: Description,
  /** The owning customer; required for vendor tokens, implied by the others. */
  organization_id: v.optional(Uuid),
})

export const UpdateInstallationBody = v.object({ description: Description })

export const InstallationListQuery = v.object({
  organization_ids: UuidList,
  consumer_ids: UuidList,
  installation_ids: UuidList,
  installation_description: v.optional(v.string()),
  installation_desc_search_mode: v.optional(
    v.picklist(['exact', 'contains', 'startswith'], 'installation_desc_search_mode must be exact, contains or startswith'),
    'exact',
  ),
  application_ids: UuidList,
  enrollment_ids: UuidList,
  /** `active` means unregistered or verified (CONTRACT section 6). */
  state: v.optional(v.picklist(['active', 'suspended', 'unregistered', 'verified'], 'state must be active, suspended, unregistered or verified')),
  ...pagingQuery,
})
export type InstallationListInput = v.InferOutput<typeof InstallationListQuery>

export const installationView = (i: Installation) => ({
  installation_id: i.installation_id,
  description: i.description,
  state: i.state,
  ...timestamps(i),
})
