/** Consumers: the end users of a customer's applications. No HTTP here. */
import type { Consumer, Organization } from '../../storage/records'
import { then, type Maybe, type Page, type Storage, type Tx } from '../../storage/storage'
import type { Slice } from '../../ops/turns'
import type { Principal } from '../shared/principal'
import { transition } from '../shared/change'
import { changeBy, type Actor } from '../shared/audit'
import { createOrFind, type Created } from '../shared/owned'
import { pageOf, scopedConditions } from '../shared/scope'
import type { ConsumerListInput } from './model'

export class ConsumerService {
  constructor(private readonly storage: Storage) {}

  create(customer: Organization, consumerId: string, actor: Actor): Promise<Created<Consumer>> {
    return changeBy(actor, this.storage, (tx) => createConsumer(tx, customer, consumerId, actor))
  }

  setState(consumer: Consumer, state: Consumer['state'], actor: Actor): Promise<Consumer> {
    return transition(this.storage, actor, 'consumers', consumer.consumer_id, state)
  }

  list(p: Principal, q: ConsumerListInput, slice?: Slice): Maybe<Page<Consumer>> {
    const filters = scopedConditions<'consumers'>(this.storage, p, [
      { on: { field: 'organization_id' }, names: 'customers', ids: q.organization_ids },
      { on: { field: 'consumer_id' }, names: 'consumers', ids: q.consumer_ids },
      { on: { enrolled: 'installation_id' }, names: 'installations', ids: q.installation_ids },
      { on: { enrolled: 'application_id' }, names: 'applications', ids: q.application_ids },
      { on: { enrolled: 'enrollment_id' }, names: 'enrollments', ids: q.enrollment_ids },
    ])
    return then(filters, (where) =>
      this.storage.list({
        table: 'consumers',
        scope: p.customerId,
        where: q.state?.length ? [...where, { field: 'state', in: q.state }] : where,
        page: pageOf(q),
        order: q.order,
        slice,
      }),
    )
  }
}

/** Inside a transaction, so enrollment creation can add its consumer atomically. */
export function createConsumer(tx: Tx, customer: Organization, consumerId: string, actor: Actor): Promise<Created<Consumer>> {
  return createOrFind(tx, actor, 'consumers', { consumer_id: consumerId, organization_id: customer.organization_id, state: 'active' })
}
