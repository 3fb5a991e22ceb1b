/**
 * An application's virtual environments (docs/api.md "Application environments"). They are the same
 * list as its `allowed_environments`: never empty, and one with keysets cannot be removed.
 */
import type { Application, Organization } from '../../storage/records'
import type { Storage, Tx } from '../../storage/storage'
import { conflict, notFound } from '../shared/errors'
import { requireSupported } from '../shared/environments'
import type { Actor } from '../shared/audit'
import { changeRecord } from '../shared/change'

export class EnvironmentService {
  constructor(private readonly storage: Storage) {}

  add(app: Application, customer: Organization, name: string, actor: Actor): Promise<Application> {
    return this.change(app, actor, 'application_environments.add', async (tx, environments) => {
      const current = (await tx.find('organizations', customer.organization_id))!
      requireSupported(current, [name], 'environment')
      if (environments.includes(name)) throw conflict('environment_exists', `The application already has ${name}.`)
      return [...environments, name].sort()
    })
  }

  remove(app: Application, name: string, actor: Actor): Promise<Application> {
    return this.change(app, actor, 'application_environments.remove', async (tx, environments) => {
      if (!environments.includes(name)) throw notFound(`Environment ${name} of this application`)
      if (environments.length === 1) throw conflict('last_environment', 'An application keeps at least one environment.')
      if (await tx.exists('keysets', [{ field: 'application_id', in: [app.application_id] }, { field: 'environment', in: [name] }])) {
        throw conflict('environment_has_keysets', `Keysets were generated in ${name}; it cannot be removed.`)
      }
      return environments.filter((n) => n !== name)
    })
  }

  private change(
    app: Application,
    actor: Actor,
    action: 'application_environments.add' | 'application_environments.remove',
    decide: (tx: Tx, environments: readonly string[]) => Promise<readonly string[]>,
  ): Promise<Application> {
    return changeRecord(this.storage, actor, 'applications', app.application_id, action, async (current, tx) => ({ environments: await decide(tx, current.environments) }))
  }
}
