import * as v from 'valibot'
import type { Consumer } from '../../storage/records'
import { AnsweredUuid, RecordState, StateList, TraceId, Uuid, UuidList, pagedListFields, pagingQuery, rememberedView, timestampFields, timestamps } from '../shared/model'

/** The owning customer; required for vendor tokens, implied by the others. */
export const OwningCustomer = v.optional(
  v.pipe(Uuid, v.description("The owning customer: required for vendor tokens; other tokens imply their own customer (or may name it).")),
)

export const CreateConsumerBody = v.object({
  consumer_id: Uuid,
  organization_id: OwningCustomer,
})

export const ConsumerListQuery = v.object({
  organization_ids: UuidList,
  consumer_ids: UuidList,
  installation_ids: UuidList,
  application_ids: UuidList,
  enrollment_ids: UuidList,
  state: StateList(['active', 'suspended']),
  ...pagingQuery,
})
export type ConsumerListInput = v.InferOutput<typeof ConsumerListQuery>

export const ConsumerRecord = v.strictObject({ consumer_id: AnsweredUuid, state: RecordState, ...timestampFields })
export const ConsumerAnswer = v.strictObject({ consumer: ConsumerRecord, trace_id: TraceId })
/** No trace_id in this list (the specification's shape). */
export const ConsumerListAnswer = v.strictObject({ consumers: v.array(ConsumerRecord), ...pagedListFields })

export const consumerView = (c: Consumer): v.InferOutput<typeof ConsumerRecord> => ({
  consumer_id: c.consumer_id,
  state: c.state,
  ...timestamps(c),
})
export const consumerText = rememberedView(consumerView)
