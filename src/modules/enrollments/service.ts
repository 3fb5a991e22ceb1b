/** Enrollments and their keysets (SPEC.md Enrollments, CONTRACT section 6). No HTTP here. */
import { sameEnrollmentTuple, type Application, type Enrollment, type Keyset, type Organization } from '../../store/database'
import type { Store } from '../../store/store'
import type { Principal } from '../../http/auth'
import { nowMicros } from '../../store/clock'
import { badRequest, conflict } from '../../http/errors'
import { transition } from '../shared/state'
import type { Created } from '../shared/owned'
import { idFilter, indexFilter, listPage, ownedKeysFilter, predicate, scopeFilters, type Filter, type Page } from '../shared/list'
import type { ConsumerService } from '../consumers/service'
import type { InstallationService } from '../installations/service'
import type { CreateEnrollmentInput, EnrollmentListInput } from './model'

export class EnrollmentService {
  constructor(
    private readonly store: Store,
    private readonly consumers: ConsumerService,
    private readonly installations: InstallationService,
  ) {}

  /**
   * `application` is in scope, active, and has the environment. A missing consumer or installation
   * is created in the application's customer, in the same transaction.
   */
  create(application: Application, customer: Organization, input: CreateEnrollmentInput): Promise<Created<Enrollment>> {
    const tables = this.store.tables
    return this.store.commit((tx) => {
      const existing = tables.enrollments.get(input.enrollment_id)
      if (existing) {
        // SPEC.md's compromised-client cases: the same enrollment claimed with other identifiers.
        if (!sameEnrollmentTuple(existing, input)) {
          throw badRequest('enrollment_mismatch', 'This enrollment_id is already enrolled with a different consumer, installation, application or environment.')
        }
        return { record: existing, created: false }
      }
      // Through the installation's own enrollments (one per consumer, application and environment): a short list.
      if (tables.enrollments.idsBy('installation', input.installation_id).some((id) => sameEnrollmentTuple(tables.enrollments.get(id)!, input))) {
        throw conflict('already_enrolled', 'This consumer, installation, application and environment already have another enrollment.')
      }
      const consumer = this.consumers.createIn(tx, customer, input.consumer_id).record
      if (consumer.state === 'suspended') throw conflict('consumer_suspended', 'The consumer is suspended.')
      const installation = this.installations.createIn(tx, customer, input.installation_id, input.installation_description).record
      if (installation.state === 'suspended') throw conflict('installation_suspended', 'The installation is suspended.')
      const now = nowMicros()
      const record = tx.put('enrollments', {
        enrollment_id: input.enrollment_id,
        organization_id: customer.organization_id,
        consumer_id: input.consumer_id,
        installation_id: input.installation_id,
        application_id: application.application_id,
        environment: input.environment,
        active_keyset_id: null,
        client_enclave_key: null,
        state: 'active',
        created: now,
        modified: now,
      })
      return { record, created: true }
    })
  }

  setState(enrollment: Enrollment, state: Enrollment['state']): Promise<Enrollment> {
    return transition(this.store, 'enrollments', enrollment.enrollment_id, state, state === 'active' ? ['suspended'] : ['active'])
  }

  /** A new active keyset for an active enrollment; the previous one is retired. */
  addKeyset(enrollment: Enrollment, clientEnclaveKey: string): Promise<Enrollment> {
    const tables = this.store.tables
    return this.store.commit((tx) => {
      const current = tables.enrollments.get(enrollment.enrollment_id)!
      // An environment without keysets may be removed from the application while enrollments in it
      // remain; a keyset there would hold an environment the application no longer has.
      if (!tables.applications.get(current.application_id)!.environments.includes(current.environment)) {
        throw badRequest('unknown_environment', `The application no longer has the environment ${current.environment}.`)
      }
      if (current.state !== 'active') throw conflict('enrollment_suspended', 'Keysets can only be added to an active enrollment.')
      const now = nowMicros()
      if (current.active_keyset_id) {
        const previous = tables.keysets.get(current.active_keyset_id)!
        tx.put('keysets', { ...previous, state: 'retired', modified: now })
      }
      const keyset = tx.put('keysets', {
        keyset_id: crypto.randomUUID(),
        enrollment_id: current.enrollment_id,
        application_id: current.application_id,
        environment: current.environment,
        client_enclave_key: clientEnclaveKey,
        state: 'active',
        created: now,
        modified: now,
      })
      return tx.put('enrollments', { ...current, active_keyset_id: keyset.keyset_id, client_enclave_key: clientEnclaveKey, modified: now })
    })
  }

  keysets(enrollment: Enrollment): Keyset[] {
    const keysets = this.store.tables.keysets
    return keysets.idsBy('enrollment', enrollment.enrollment_id).map((id) => keysets.get(id)!)
  }

  list(p: Principal, q: EnrollmentListInput): Page<Enrollment> {
    const { enrollments, applications, consumers, installations } = this.store.tables
    const customerId = p.customerId
    const by = (index: string, keyOf: (e: Enrollment) => string) => (keys: readonly string[]) => indexFilter(enrollments, index, keys, keyOf)
    // The enrollments of a customer's own applications, consumers or installations are all its own:
    // such a filter implies the scope, so a page of one index list is a slice.
    const scoped = (index: string, keys: readonly string[], keyOf: (e: Enrollment) => string, ownerOf: (key: string) => string | undefined) =>
      ownedKeysFilter(customerId, keys, ownerOf, by(index, keyOf))
    const filters: Filter<Enrollment>[] = scopeFilters(customerId, by('organization', (e) => e.organization_id))
    if (q.organization_ids?.length) filters.push(scoped('organization', q.organization_ids, (e) => e.organization_id, (id) => id))
    if (q.consumer_ids?.length) filters.push(scoped('consumer', q.consumer_ids, (e) => e.consumer_id, (id) => consumers.get(id)?.organization_id))
    if (q.installation_ids?.length) {
      filters.push(scoped('installation', q.installation_ids, (e) => e.installation_id, (id) => installations.get(id)?.organization_id))
    }
    if (q.application_ids?.length) {
      filters.push(scoped('application', q.application_ids, (e) => e.application_id, (id) => applications.get(id)?.organization_id))
    }
    if (q.enrollment_ids?.length) filters.push(idFilter(enrollments, q.enrollment_ids))
    if (q.environment) filters.push(predicate((e) => e.environment === q.environment))
    if (q.state) filters.push(predicate((e) => e.state === q.state))
    return listPage(enrollments, filters, { pageSize: q.page_size, order: q.order, ...(q.page ? { page: q.page } : {}) })
  }
}
