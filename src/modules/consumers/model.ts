import * as v from 'valibot'
import type { Consumer } from '../../storage/records'
import { Uuid, UuidList, pagingQuery, timestamps } from '../shared/model'

export const CreateConsumerBody = v.object({
  consumer_id: Uuid,
  /** The owning customer; required for vendor tokens, implied by the others. */
  organization_id: v.optional(Uuid),
})

export const ConsumerListQuery = v.object({
  organization_ids: UuidList,
  consumer_ids: UuidList,
  installation_ids: UuidList,
  application_ids: UuidList,
  enrollment_ids: UuidList,
  state: v.optional(v.picklist(['active', 'suspended'], 'state must be active or suspended')),
  ...pagingQuery,
})
export type ConsumerListInput = v.InferOutput<typeof ConsumerListQuery>

export const consumerView = (c: Consumer) => ({
  consumer_id: c.consumer_id,
  state: c.state,
  ...timestamps(c),
})
