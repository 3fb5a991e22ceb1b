/** Applications of a customer (SPEC.md Applications, CONTRACT section 5). No HTTP here. */
import { createHash, randomBytes } from 'node:crypto'
import type { Application, Organization } from '../../store/database'
import type { Store } from '../../store/store'
import { nowMicros } from '../../store/clock'
import { badRequest } from '../../http/errors'
import { defaultEnvironment, supportedEnvironments } from '../shared/environments'
import { transition } from '../shared/state'
import type { CreateApplicationInput } from './model'

export class ApplicationService {
  constructor(private readonly store: Store) {}

  /** The new application and its api_key, which is shown once and stored only as a hash. */
  create(customer: Organization, input: CreateApplicationInput): Promise<{ application: Application; apiKey: string }> {
    const environments = input.allowed_environments ?? [defaultEnvironment(customer)]
    const supported = supportedEnvironments(customer)
    const unknown = environments.filter((name) => !supported.includes(name))
    if (unknown.length > 0) {
      throw badRequest('unknown_environment', `Not a supported environment of this customer: ${unknown.join(', ')}.`)
    }
    const apiKey = `kwk_${randomBytes(24).toString('base64url')}`
    return this.store.commit((tx) => {
      // SPEC rule 3: a supplied id is used unless it is already registered; then a random one is.
      const requested = input.application_id
      const id = requested && !this.store.tables.applications.has(requested) ? requested : crypto.randomUUID()
      const now = nowMicros()
      const application = tx.put('applications', {
        application_id: id,
        organization_id: customer.organization_id,
        description: input.description,
        environments,
        state: 'active',
        api_key_hash: createHash('sha256').update(apiKey).digest('hex'),
        created: now,
        modified: now,
      })
      return { application, apiKey }
    })
  }

  updateDescription(app: Application, description: string): Promise<Application> {
    return this.store.commit((tx) => {
      const current = this.store.tables.applications.get(app.application_id)!
      return tx.put('applications', { ...current, description, modified: nowMicros() })
    })
  }

  setState(app: Application, state: Application['state']): Promise<Application> {
    return transition(this.store, 'applications', app.application_id, state, state === 'active' ? ['suspended'] : ['active'])
  }
}
