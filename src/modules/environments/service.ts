/**
 * An application's virtual environments (SPEC.md Application environments). They are the same
 * list as its `allowed_environments`: never empty, and one with keysets cannot be removed.
 */
import { applicationEnvironmentKey, type Application, type Organization } from '../../store/database'
import type { Store } from '../../store/store'
import { nowMicros } from '../../store/clock'
import { badRequest, conflict, notFound } from '../../http/errors'
import { supportedEnvironments } from '../shared/environments'

export class EnvironmentService {
  constructor(private readonly store: Store) {}

  add(app: Application, customer: Organization, name: string): Promise<Application> {
    if (!supportedEnvironments(customer).includes(name)) {
      throw badRequest('unknown_environment', `${name} is not a supported environment of this customer.`)
    }
    return this.change(app, (environments) => {
      if (environments.includes(name)) throw conflict('environment_exists', `The application already has ${name}.`)
      return [...environments, name].sort()
    })
  }

  remove(app: Application, name: string): Promise<Application> {
    const keysets = this.store.tables.keysets
    return this.change(app, (environments) => {
      if (!environments.includes(name)) throw notFound(`Environment ${name} of this application`)
      if (environments.length === 1) throw conflict('last_environment', 'An application keeps at least one environment.')
      if (keysets.idsBy('applicationEnvironment', applicationEnvironmentKey(app.application_id, name)).length > 0) {
        throw conflict('environment_has_keysets', `Keysets were generated in ${name}; it cannot be removed.`)
      }
      return environments.filter((n) => n !== name)
    })
  }

  private change(app: Application, decide: (environments: readonly string[]) => readonly string[]): Promise<Application> {
    return this.store.commit((tx) => {
      const current = this.store.tables.applications.get(app.application_id)!
      return tx.put('applications', { ...current, environments: decide(current.environments), modified: nowMicros() })
    })
  }
}
