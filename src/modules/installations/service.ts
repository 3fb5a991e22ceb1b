/** Installations: a device, or an app inside one browser instance. No HTTP here. */
import type { Installation, Organization } from '../../storage/records'
import { then, type Condition, type Maybe, type Page, type Storage, type Tx } from '../../storage/storage'
import type { Slice } from '../../ops/turns'
import type { Principal } from '../shared/principal'
import { changeRecord, transition } from '../shared/change'
import { changeBy, type Actor } from '../shared/audit'
import { createOrFind, type Created } from '../shared/owned'
import { pageOf, scopedConditions } from '../shared/scope'
import type { InstallationListInput } from './model'

/** Which states each `state` filter value covers (docs/api.md "Installations": `active` is not suspended). */
const STATE_FILTER: Record<NonNullable<InstallationListInput['state']>[number], readonly Installation['state'][]> = {
  active: ['unregistered', 'verified'],
  suspended: ['suspended'],
  unregistered: ['unregistered'],
  verified: ['verified'],
}

export class InstallationService {
  constructor(
    private readonly storage: Storage,
    /** New installations start verified (the server's automatic-verification feature). */
    private readonly autoVerify: boolean,
  ) {}

  create(customer: Organization, installationId: string, description: string, actor: Actor): Promise<Created<Installation>> {
    return changeBy(actor, this.storage, (tx) => this.createIn(tx, customer, installationId, description, actor))
  }

  /** Inside a transaction, so enrollment creation can add its installation atomically. */
  createIn(tx: Tx, customer: Organization, installationId: string, description: string, actor: Actor): Promise<Created<Installation>> {
    return createOrFind(tx, actor, 'installations', {
      installation_id: installationId,
      organization_id: customer.organization_id,
      description,
      state: this.autoVerify ? 'verified' : 'unregistered',
    })
  }

  updateDescription(installation: Installation, description: string, actor: Actor): Promise<Installation> {
    return changeRecord(this.storage, actor, 'installations', installation.installation_id, 'installation.update', () => ({ description }))
  }

  suspend(installation: Installation, actor: Actor): Promise<Installation> {
    return transition(this.storage, actor, 'installations', installation.installation_id, 'suspended')
  }

  verify(installation: Installation, actor: Actor): Promise<Installation> {
    return transition(this.storage, actor, 'installations', installation.installation_id, 'verified')
  }

  list(p: Principal, q: InstallationListInput, slice?: Slice): Maybe<Page<Installation>> {
    const filters = scopedConditions<'installations'>(this.storage, p, [
      { on: { field: 'organization_id' }, names: 'customers', ids: q.organization_ids },
      { on: { field: 'installation_id' }, names: 'installations', ids: q.installation_ids },
      { on: { enrolled: 'consumer_id' }, names: 'consumers', ids: q.consumer_ids },
      { on: { enrolled: 'application_id' }, names: 'applications', ids: q.application_ids },
      { on: { enrolled: 'enrollment_id' }, names: 'enrollments', ids: q.enrollment_ids },
    ])
    return then(filters, (where) => {
      const tests: Condition<'installations'>[] = []
      if (q.installation_description !== undefined) {
        tests.push({ field: 'description', match: q.installation_desc_search_mode, text: q.installation_description })
      }
      if (q.state?.length) tests.push({ field: 'state', in: [...new Set(q.state.flatMap((state) => STATE_FILTER[state]))] })
      return this.storage.list({ table: 'installations', scope: p.customerId, where: [...where, ...tests], page: pageOf(q), order: q.order, slice })
    })
  }
}
