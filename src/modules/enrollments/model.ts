import * as v from 'valibot'
import { enrollmentNickname, type Enrollment, type Keyset } from '../../storage/records'
import { Description, EnvironmentName, Uuid, UuidList, pagingQuery, timestamps } from '../shared/model'
import { formatTimestamp } from '../../store/clock'

/** A sent `nickname` is ignored: it is always generated (CONTRACT section 6). */
export const CreateEnrollmentBody = v.object({
  enrollment_id: Uuid,
  consumer_id: Uuid,
  installation_id: Uuid,
  application_id: Uuid,
  environment: EnvironmentName,
  installation_description: Description,
})
export type CreateEnrollmentInput = v.InferOutput<typeof CreateEnrollmentBody>

export const EnrollmentListQuery = v.object({
  organization_ids: UuidList,
  consumer_ids: UuidList,
  installation_ids: UuidList,
  application_ids: UuidList,
  enrollment_ids: UuidList,
  environment: v.optional(EnvironmentName),
  state: v.optional(v.picklist(['active', 'suspended'], 'state must be active or suspended')),
  ...pagingQuery,
})
export type EnrollmentListInput = v.InferOutput<typeof EnrollmentListQuery>

/** The keyset list pages like the other lists (docs/api.md). */
export const KeysetListQuery = v.object({ ...pagingQuery })

export const CreateKeysetBody = v.object({
  client_enclave_key: v.pipe(v.string(), v.minLength(1, 'Must not be empty')),
})

export const enrollmentView = (e: Enrollment) => ({
  enrollment_id: e.enrollment_id,
  installation_id: e.installation_id,
  consumer_id: e.consumer_id,
  application_id: e.application_id,
  environment: e.environment,
  nickname: enrollmentNickname(e),
  active_keyset_id: e.active_keyset_id,
  client_enclave_key: e.client_enclave_key,
  client_storage_key_shares: null,
  state: e.state,
  ...timestamps(e),
})

export const keysetView = (k: Keyset) => ({
  keyset_id: k.keyset_id,
  enrollment_id: k.enrollment_id,
  environment: k.environment,
  state: k.state,
  created: formatTimestamp(k.created),
})
