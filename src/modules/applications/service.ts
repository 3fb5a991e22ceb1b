/** Applications of a customer (docs/api.md "Applications"). No HTTP here. */
import { createHash, randomBytes } from 'node:crypto'
import type { Application, Organization } from '../../storage/records'
import { then, type Maybe, type Storage } from '../../storage/storage'
import type { Slice } from '../../ops/turns'
import type { Principal } from '../shared/principal'
import { defaultEnvironment, requireSupported } from '../shared/environments'
import { changeRecord, transition } from '../shared/change'
import { changeBy, recordEvent, type Actor } from '../shared/audit'
import { refuseBeyondLimit } from '../shared/limits'
import type { CreateApplicationInput } from './model'

export class ApplicationService {
  constructor(private readonly storage: Storage) {}

  /** In creation order: the vendor all; others their customer's. */
  list(p: Principal, slice?: Slice): Maybe<readonly Application[]> {
    return then(this.storage.list({ table: 'applications', scope: p.customerId, where: [], order: 'asc', slice }), (page) => page.items)
  }

  /** The new application and its api_key, which is shown once and stored only as a hash. */
  create(customer: Organization, input: CreateApplicationInput, actor: Actor): Promise<{ application: Application; apiKey: string }> {
    const apiKey = `kwk_${randomBytes(24).toString('base64url')}`
    return changeBy(actor, this.storage, async (tx) => {
      // Read again in the transaction: an environment removed meanwhile must not be handed out.
      // Locked for update at once: the bound on applications counts under it (limits.ts).
      const current = (await tx.find('organizations', customer.organization_id, 'update'))!
      const environments = input.allowed_environments ?? [defaultEnvironment(current)]
      requireSupported(current, environments, 'allowed_environments')
      await refuseBeyondLimit(tx, customer.organization_id, 'applications', false)
      const fields = {
        organization_id: customer.organization_id,
        description: input.description,
        environments,
        state: 'active' as const,
        api_key_hash: createHash('sha256').update(apiKey).digest('hex'),
      }
      // docs/api.md "Applications": a supplied id is used unless it is already registered; then a random one is.
      const requested = input.application_id ? await tx.insertIfAbsent('applications', { application_id: input.application_id, ...fields }) : null
      const application = requested?.inserted ? requested.record : await tx.insert('applications', { application_id: crypto.randomUUID(), ...fields })
      recordEvent(tx, actor, 'application.create', { target: application.application_id, customerId: application.organization_id, before: null, after: application })
      return { application, apiKey }
    })
  }

  updateDescription(app: Application, description: string, actor: Actor): Promise<Application> {
    return changeRecord(this.storage, actor, 'applications', app.application_id, 'application.update', () => ({ description }))
  }

  setState(app: Application, state: Application['state'], actor: Actor): Promise<Application> {
    return transition(this.storage, actor, 'applications', app.application_id, state)
  }
}
