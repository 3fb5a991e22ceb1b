/** Installations: a device, or an app inside one browser instance. No HTTP here. */
import type { Installation, Organization } from '../../store/database'
import type { Store, Transaction } from '../../store/store'
import type { Principal } from '../../http/auth'
import { nowMicros } from '../../store/clock'
import { transition } from '../shared/state'
import { createOrFind, type Created } from '../shared/owned'
import { idFilter, indexFilter, listPage, ownedKeysFilter, predicate, scopeFilters, type Filter, type Page } from '../shared/list'
import { throughEnrollments } from '../shared/relations'
import type { InstallationListInput } from './model'

/** Which states each `state` filter value covers. */
const STATE_FILTER: Record<NonNullable<InstallationListInput['state']>, readonly Installation['state'][]> = {
  active: ['unregistered', 'verified'],
  suspended: ['suspended'],
  unregistered: ['unregistered'],
  verified: ['verified'],
}

const DESCRIPTION_MATCH = {
  exact: (description: string, text: string) => description === text,
  contains: (description: string, text: string) => description.includes(text),
  startswith: (description: string, text: string) => description.startsWith(text),
}

export class InstallationService {
  constructor(
    private readonly store: Store,
    /** New installations start verified (the server's automatic-verification feature). */
    private readonly autoVerify: boolean,
  ) {}

  create(customer: Organization, installationId: string, description: string): Promise<Created<Installation>> {
    return this.store.commit((tx) => this.createIn(tx, customer, installationId, description))
  }

  /** Inside a transaction, so enrollment creation can add its installation atomically. */
  createIn(tx: Transaction, customer: Organization, installationId: string, description: string): Created<Installation> {
    return createOrFind(this.store.tables.installations.get(installationId), customer.organization_id, () => {
      const now = nowMicros()
      return tx.put('installations', {
        installation_id: installationId,
        organization_id: customer.organization_id,
        description,
        state: this.autoVerify ? 'verified' : 'unregistered',
        created: now,
        modified: now,
      })
    })
  }

  updateDescription(installation: Installation, description: string): Promise<Installation> {
    return this.store.commit((tx) => {
      const current = this.store.tables.installations.get(installation.installation_id)!
      return tx.put('installations', { ...current, description, modified: nowMicros() })
    })
  }

  suspend(installation: Installation): Promise<Installation> {
    return transition(this.store, 'installations', installation.installation_id, 'suspended', ['unregistered', 'verified'])
  }

  verify(installation: Installation): Promise<Installation> {
    return transition(this.store, 'installations', installation.installation_id, 'verified', ['unregistered', 'suspended'])
  }

  list(p: Principal, q: InstallationListInput): Page<Installation> {
    const tables = this.store.tables
    const installations = tables.installations
    const byOrganization = (keys: readonly string[]) => indexFilter(installations, 'organization', keys, (i) => i.organization_id)
    const through = (what: Parameters<typeof throughEnrollments>[3], keys: readonly string[]) =>
      throughEnrollments<Installation>(tables, 'installation', (i) => i.installation_id, what, keys)
    const filters: Filter<Installation>[] = scopeFilters(p.customerId, byOrganization)
    if (q.organization_ids?.length) filters.push(ownedKeysFilter(p.customerId, q.organization_ids, (id) => id, byOrganization))
    if (q.installation_ids?.length) filters.push(idFilter(installations, q.installation_ids))
    if (q.consumer_ids?.length) filters.push(through('consumer', q.consumer_ids))
    if (q.application_ids?.length) filters.push(through('application', q.application_ids))
    if (q.enrollment_ids?.length) filters.push(through('enrollment', q.enrollment_ids))
    if (q.installation_description !== undefined) {
      const text = q.installation_description
      const matches = DESCRIPTION_MATCH[q.installation_desc_search_mode]
      filters.push(predicate((i) => matches(i.description, text)))
    }
    if (q.state) {
      const states = STATE_FILTER[q.state]
      filters.push(predicate((i) => states.includes(i.state)))
    }
    return listPage(installations, filters, { pageSize: q.page_size, order: q.order, ...(q.page ? { page: q.page } : {}) })
  }
}
