/** Consumers: the end users of a customer's applications. No HTTP here. */
import type { Consumer, Organization } from '../../store/database'
import type { Store, Transaction } from '../../store/store'
import type { Principal } from '../../http/auth'
import { nowMicros } from '../../store/clock'
import { transition } from '../shared/state'
import { createOrFind, type Created } from '../shared/owned'
import { idFilter, indexFilter, listPage, ownedKeysFilter, predicate, scopeFilters, type Filter, type Page } from '../shared/list'
import { throughEnrollments } from '../shared/relations'
import type { ConsumerListInput } from './model'

export class ConsumerService {
  constructor(private readonly store: Store) {}

  create(customer: Organization, consumerId: string): Promise<Created<Consumer>> {
    return this.store.commit((tx) => this.createIn(tx, customer, consumerId))
  }

  /** Inside a transaction, so enrollment creation can add its consumer atomically. */
  createIn(tx: Transaction, customer: Organization, consumerId: string): Created<Consumer> {
    return createOrFind(this.store.tables.consumers.get(consumerId), customer.organization_id, () => {
      const now = nowMicros()
      return tx.put('consumers', { consumer_id: consumerId, organization_id: customer.organization_id, state: 'active', created: now, modified: now })
    })
  }

  setState(consumer: Consumer, state: Consumer['state']): Promise<Consumer> {
    return transition(this.store, 'consumers', consumer.consumer_id, state, state === 'active' ? ['suspended'] : ['active'])
  }

  list(p: Principal, q: ConsumerListInput): Page<Consumer> {
    const tables = this.store.tables
    const consumers = tables.consumers
    const byOrganization = (keys: readonly string[]) => indexFilter(consumers, 'organization', keys, (c) => c.organization_id)
    const through = (what: Parameters<typeof throughEnrollments>[3], keys: readonly string[]) =>
      throughEnrollments<Consumer>(tables, 'consumer', (c) => c.consumer_id, what, keys)
    const filters: Filter<Consumer>[] = scopeFilters(p.customerId, byOrganization)
    if (q.organization_ids?.length) filters.push(ownedKeysFilter(p.customerId, q.organization_ids, (id) => id, byOrganization))
    if (q.consumer_ids?.length) filters.push(idFilter(consumers, q.consumer_ids))
    if (q.installation_ids?.length) filters.push(through('installation', q.installation_ids))
    if (q.application_ids?.length) filters.push(through('application', q.application_ids))
    if (q.enrollment_ids?.length) filters.push(through('enrollment', q.enrollment_ids))
    if (q.state) filters.push(predicate((c) => c.state === q.state))
    return listPage(consumers, filters, { pageSize: q.page_size, order: q.order, ...(q.page ? { page: q.page } : {}) })
  }
}
