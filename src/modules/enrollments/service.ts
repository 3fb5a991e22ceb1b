/** Enrollments and their keysets (docs/api.md "Enrollments"). No HTTP here. */
import { sameEnrollmentTuple, type Application, type Enrollment, type Keyset, type Organization } from '../../storage/records'
import { then, UniqueViolation, type ListQuery, type Maybe, type Page, type Storage } from '../../storage/storage'
import type { Slice } from '../../ops/turns'
import type { Principal } from '../shared/principal'
import { badRequest, conflict, unauthorized } from '../shared/errors'
import { transition } from '../shared/change'
import { changeBy, recordEvent, type Actor } from '../shared/audit'
import type { Created } from '../shared/owned'
import { pageOf, scopedConditions } from '../shared/scope'
import { countTowardsBound, refuseWhenFull } from '../shared/limits'
import { createConsumer } from '../consumers/service'
import type { InstallationService } from '../installations/service'
import type { CreateEnrollmentInput, EnrollmentListInput } from './model'

/** The value of a settled promise, or its rejection thrown. */
function settledValue<T>(result: PromiseSettledResult<T>): T {
  if (result.status === 'rejected') throw result.reason
  return result.value
}

/** docs/api.md "Status codes and errors": requests for an application its customer has deactivated are 401. */
export function requireActive(app: Application): Application {
  if (app.state !== 'active') throw unauthorized('The application of this enrollment is suspended.')
  return app
}

/** 400 `unknown_environment` when the application does not have the environment an enrollment's body names. */
export function requireEnvironment(app: Application, environment: string): void {
  if (!app.environments.includes(environment)) {
    throw badRequest('unknown_environment', `The application has no environment ${environment}.`, [{ path: 'body.environment', message: 'Not an environment of the application' }])
  }
}

export class EnrollmentService {
  constructor(
    private readonly storage: Storage,
    private readonly installations: InstallationService,
  ) {}

  /**
   * `application` was found in scope. Inside the transaction it must still be active and have the
   * environment; a missing consumer or installation is created in its customer.
   */
  create(application: Application, customer: Organization, input: CreateEnrollmentInput, actor: Actor): Promise<Created<Enrollment>> {
    const tuple = { consumer_id: input.consumer_id, installation_id: input.installation_id, application_id: application.application_id, environment: input.environment }
    return changeBy(actor, this.storage, async (tx) => {
      // Asked together (in database mode, one round trip: docs/storage.md "Round trips"), judged in
      // this order: the application (a suspended one is 401 even for an enrollment that exists,
      // docs/api.md "Status codes and errors"), then the id, then the tuple.
      const [current, existing, tupleTaken] = await Promise.all([
        tx.find('applications', application.application_id),
        tx.find('enrollments', input.enrollment_id),
        tx.exists('enrollments', [{ field: 'installation_id', in: [tuple.installation_id] }, ...fieldsOf(tuple)]),
      ])
      requireEnvironment(requireActive(current!), input.environment)
      if (existing) return sameEnrollment(existing, input)
      if (tupleTaken) {
        // The same request may have been committed by another instance since the id was looked up
        // (PostgreSQL reads each statement afresh, docs/storage.md): then the id decides (200).
        const committed = await tx.find('enrollments', input.enrollment_id)
        if (committed) return sameEnrollment(committed, input)
        throw alreadyEnrolled()
      }
      // Both sent at once too, and judged consumer first. A refusal after the other was created
      // rolls both back (its event with them: events go with the COMMIT).
      const [consumerCreated, installationCreated] = await Promise.allSettled([
        createConsumer(tx, customer, input.consumer_id, actor),
        this.installations.createIn(tx, customer, input.installation_id, input.installation_description, actor),
      ])
      const consumer = settledValue(consumerCreated).record
      if (consumer.state === 'suspended') throw conflict('consumer_suspended', 'The consumer is suspended.')
      const installation = settledValue(installationCreated).record
      if (installation.state === 'suspended') throw conflict('installation_suspended', 'The installation is suspended.')
      try {
        const { record, inserted } = await tx.insertIfAbsent('enrollments', {
          enrollment_id: input.enrollment_id,
          organization_id: customer.organization_id,
          ...tuple,
          active_keyset_id: null,
          client_enclave_key: null,
          state: 'active',
        })
        // Inserted at the same moment by another request: answered as if it had come first.
        if (!inserted) return sameEnrollment(record, input)
        recordEvent(tx, actor, 'enrollment.create', { target: record.enrollment_id, customerId: record.organization_id, before: null, after: record })
        return { record, created: true }
      } catch (error) {
        if (error instanceof UniqueViolation && error.rule === 'enrollment_tuple') throw alreadyEnrolled()
        throw error
      }
    })
  }

  setState(enrollment: Enrollment, state: Enrollment['state'], actor: Actor): Promise<Enrollment> {
    return transition(this.storage, actor, 'enrollments', enrollment.enrollment_id, state)
  }

  /**
   * A new active keyset for an active enrollment of an active application; the previous one is
   * retired. One event, `keyset.create` (docs/api.md "Audit events"), for the whole change.
   */
  addKeyset(enrollment: Enrollment, clientEnclaveKey: string, actor: Actor): Promise<Enrollment> {
    return changeBy(actor, this.storage, async (tx) => {
      // Asked together (an enrollment's application never changes), and so are the writes below:
      // in database mode three round trips instead of six (docs/storage.md "Round trips").
      // The keysets are counted after the enrollment's lock (in database mode these statements go
      // out in this order), so concurrent keysets of one enrollment cannot pass the bound; it is
      // judged after the other checks, which outrank it.
      const [locked, application, keysets] = await Promise.all([
        tx.find('enrollments', enrollment.enrollment_id, 'update'),
        tx.find('applications', enrollment.application_id),
        countTowardsBound(tx, enrollment.enrollment_id, 'keysets'),
      ])
      const current = locked!
      const app = requireActive(application!)
      // An environment without keysets may be removed from the application while enrollments in it
      // remain; a keyset there would hold an environment the application no longer has.
      if (!app.environments.includes(current.environment)) {
        throw badRequest('unknown_environment', `The application no longer has the environment ${current.environment}.`)
      }
      if (current.state !== 'active') throw conflict('enrollment_suspended', 'Keysets can only be added to an active enrollment.')
      refuseWhenFull(keysets, 'keysets')
      const keysetId = crypto.randomUUID()
      const [, keyset, changed] = await Promise.all([
        current.active_keyset_id ? tx.update('keysets', current.active_keyset_id, { state: 'retired' }) : undefined,
        tx.insert('keysets', {
          keyset_id: keysetId,
          enrollment_id: current.enrollment_id,
          application_id: current.application_id,
          environment: current.environment,
          client_enclave_key: clientEnclaveKey,
          state: 'active',
        }),
        tx.update('enrollments', current.enrollment_id, { active_keyset_id: keysetId, client_enclave_key: clientEnclaveKey }),
      ])
      recordEvent(tx, actor, 'keyset.create', { target: keyset.keyset_id, customerId: current.organization_id, before: null, after: keyset })
      return changed
    })
  }

  /** The enrollment's keysets: one page, or all of them (at most MAX_KEYSETS_PER_ENROLLMENT, shared/limits.ts). */
  keysets(enrollment: Enrollment, page: ListQuery<'keysets'>['page'], order: 'asc' | 'desc', slice?: Slice): Maybe<Page<Keyset>> {
    return this.storage.list({ table: 'keysets', where: [{ field: 'enrollment_id', in: [enrollment.enrollment_id] }], page, order, slice })
  }

  list(p: Principal, q: EnrollmentListInput, slice?: Slice): Maybe<Page<Enrollment>> {
    const filters = scopedConditions<'enrollments'>(this.storage, p, [
      { on: { field: 'organization_id' }, names: 'customers', ids: q.organization_ids },
      { on: { field: 'consumer_id' }, names: 'consumers', ids: q.consumer_ids },
      { on: { field: 'installation_id' }, names: 'installations', ids: q.installation_ids },
      { on: { field: 'application_id' }, names: 'applications', ids: q.application_ids },
      { on: { field: 'enrollment_id' }, names: 'enrollments', ids: q.enrollment_ids },
    ])
    return then(filters, (where) => {
      const tests = [
        ...(q.environment?.length ? [{ field: 'environment' as const, in: q.environment }] : []),
        ...(q.state?.length ? [{ field: 'state' as const, in: q.state }] : []),
      ]
      return this.storage.list({ table: 'enrollments', scope: p.customerId, where: [...where, ...tests], page: pageOf(q), order: q.order, slice })
    })
  }
}

/** The enrollment already stored under this id: the same four identifiers return it (200); others are the compromised-client case of docs/api.md "Enrollments". */
function sameEnrollment(existing: Enrollment, input: CreateEnrollmentInput): Created<Enrollment> {
  if (!sameEnrollmentTuple(existing, input)) {
    throw badRequest('enrollment_mismatch', 'This enrollment_id is already enrolled with a different consumer, installation, application or environment.')
  }
  return { record: existing, created: false }
}

const alreadyEnrolled = () => conflict('already_enrolled', 'This consumer, installation, application and environment already have another enrollment.')

const fieldsOf = (tuple: Pick<Enrollment, 'consumer_id' | 'application_id' | 'environment'>) =>
  (['consumer_id', 'application_id', 'environment'] as const).map((field) => ({ field, in: [tuple[field]] }))
