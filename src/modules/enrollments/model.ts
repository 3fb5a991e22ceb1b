import * as v from 'valibot'
import { enrollmentNickname, type Enrollment, type Keyset } from '../../storage/records'
import {
  AnsweredEnvironmentName,
  AnsweredUuid,
  Description,
  EnvironmentFilter,
  EnvironmentName,
  RecordState,
  StateList,
  Timestamp,
  TraceId,
  Uuid,
  UuidList,
  pageFields,
  pageSize,
  pagedListFields,
  pagingQuery,
  timestampFields,
  timestamps,
  rememberedView,
} from '../shared/model'
import { formatTimestamp } from '../../store/clock'

/** A sent `nickname` is ignored: it is always generated (docs/api.md, "Enrollments"). */
export const CreateEnrollmentBody = v.object({
  enrollment_id: Uuid,
  consumer_id: Uuid,
  installation_id: Uuid,
  application_id: Uuid,
  environment: v.pipe(EnvironmentName, v.description("One of the application's environments.")),
  installation_description: v.pipe(Description, v.description('The description of the installation, should it be created.')),
})
export type CreateEnrollmentInput = v.InferOutput<typeof CreateEnrollmentBody>

export const EnrollmentListQuery = v.object({
  organization_ids: UuidList,
  consumer_ids: UuidList,
  installation_ids: UuidList,
  application_ids: UuidList,
  enrollment_ids: UuidList,
  environment: EnvironmentFilter,
  state: StateList(['active', 'suspended']),
  ...pagingQuery,
})
export type EnrollmentListInput = v.InferOutput<typeof EnrollmentListQuery>

/** Paged when `page` is sent; otherwise the whole list, or its first `page_size` (docs/api.md "Keysets"). */
export const KeysetListQuery = v.object({
  ...pagingQuery,
  page_size: v.optional(v.pipe(pageSize(), v.description('At most this many keysets; with `page`, the page\'s size (100 unless sent).'))),
})

export const CreateKeysetBody = v.object({
  client_enclave_key: v.pipe(
    v.string(),
    v.minLength(1, 'Must not be empty'),
    v.description('A P-256 public key: base64 or base64url of its SPKI DER, or a PEM PUBLIC KEY block.'),
  ),
})

export const EnrollmentRecord = v.strictObject({
  enrollment_id: AnsweredUuid,
  installation_id: AnsweredUuid,
  consumer_id: AnsweredUuid,
  application_id: AnsweredUuid,
  environment: AnsweredEnvironmentName,
  nickname: v.pipe(v.string(), v.description('Always `<installation_id>:<consumer_id>:<application_id>:<ENVIRONMENT>`.')),
  active_keyset_id: v.nullable(AnsweredUuid),
  client_enclave_key: v.pipe(v.nullable(v.string()), v.description('The standard base64 of the active key\'s SPKI DER; null before the first keyset.')),
  client_storage_key_shares: v.null(),
  state: RecordState,
  ...timestampFields,
})
export const EnrollmentAnswer = v.strictObject({ enrollment: EnrollmentRecord, trace_id: TraceId })
/** No trace_id in this list, like the consumer list. */
export const EnrollmentListAnswer = v.strictObject({ enrollments: v.array(EnrollmentRecord), ...pagedListFields })

export const KeysetRecord = v.strictObject({
  keyset_id: AnsweredUuid,
  enrollment_id: AnsweredUuid,
  environment: AnsweredEnvironmentName,
  state: v.picklist(['active', 'retired']),
  created: Timestamp,
})
/** Two shapes, as the installation list's (docs/api.md "Keysets"), each with the trace id of a single-record answer. */
export const KeysetListAnswer = v.union([
  v.pipe(v.strictObject({ keysets: v.array(KeysetRecord), ...pageFields, trace_id: TraceId }), v.title('Paged (page sent)')),
  v.pipe(v.strictObject({ keysets: v.array(KeysetRecord), trace_id: TraceId }), v.title('Whole, or at most page_size (no page sent)')),
])

export const enrollmentView = (e: Enrollment): v.InferOutput<typeof EnrollmentRecord> => ({
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

export const enrollmentText = rememberedView(enrollmentView)

export const keysetView = (k: Keyset): v.InferOutput<typeof KeysetRecord> => ({
  keyset_id: k.keyset_id,
  enrollment_id: k.enrollment_id,
  environment: k.environment,
  state: k.state,
  created: formatTimestamp(k.created),
})
export const keysetText = rememberedView(keysetView)
