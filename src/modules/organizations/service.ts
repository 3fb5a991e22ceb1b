/**
 * Organization rules (docs/api.md "Organizations"). No HTTP here: callers pass records already
 * found in scope and authorised (see http/access.ts); this decides what the change is.
 */
import type { EnvironmentSet, Organization } from '../../storage/records'
import { type Maybe, type Storage, type Tx } from '../../storage/storage'
import type { Slice } from '../../ops/turns'
import { badRequest, conflict, notFound } from '../shared/errors'
import type { Principal } from '../shared/principal'
import type { CreateOrganizationInput } from './model'
import { changeRecord, transition } from '../shared/change'
import { changeBy, customerIdOf, recordEvent, type Actor } from '../shared/audit'
import { MAX_ENVIRONMENTS } from '../shared/model'
import { refuseBeyondLimit } from '../shared/limits'
import { readableOrganizationRecords } from '../shared/scope'

export class OrganizationService {
  constructor(private readonly storage: Storage) {}

  /** In creation order: the vendor all; a customer itself then its partners; a partner itself. */
  list(p: Principal, slice?: Slice): Maybe<readonly Organization[]> {
    return readableOrganizationRecords(this.storage, p, slice)
  }

  /** The new organization's parent decides its type: the vendor → a customer, a customer → a partner. */
  create(p: Principal, input: CreateOrganizationInput, actor: Actor): Promise<Organization> {
    return changeBy(actor, this.storage, async (tx) => {
      const parent = await this.parentFor(tx, p, input.parent_id)
      const type = parent.organization_type === 'vendor' ? 'customer' : 'partner'
      if (type === 'partner' && input.supported_environments) {
        throw badRequest('environments_not_allowed', 'supported_environments can only be given to a customer.', [
          { path: 'body.supported_environments', message: 'Only a customer can be enabled for virtual environments' },
        ])
      }
      // Locked by `parentFor` unless it is the caller's own record, which it did not read.
      if (type === 'partner') await refuseBeyondLimit(tx, parent.organization_id, 'partners', parent === p.organization)
      const envs = input.supported_environments
      const org = await tx.insert('organizations', {
        organization_id: crypto.randomUUID(),
        parent_id: parent.organization_id,
        organization_type: type,
        description: input.description,
        state: 'active',
        environments: envs ? { default: envs.default, supported: envs.supported } : null,
      })
      recordEvent(tx, actor, 'organization.create', { target: org.organization_id, customerId: customerIdOf(org), before: null, after: org })
      return org
    })
  }

  private async parentFor(tx: Tx, p: Principal, parentId: string | undefined): Promise<Organization> {
    if (p.organization.organization_type === 'customer') {
      if (parentId !== undefined && parentId !== p.organization.organization_id) {
        throw badRequest('invalid_parent', 'A customer creates partners of itself: leave parent_id out or send your own id.', [
          { path: 'body.parent_id', message: "Must be omitted or the caller's own organization_id" },
        ])
      }
      return p.organization
    }
    if (parentId === undefined) {
      throw badRequest('parent_required', 'parent_id is required: the vendor id for a customer, a customer id for a partner.', [
        { path: 'body.parent_id', message: 'Required' },
      ])
    }
    // Organizations are never deleted and their type never changes: the caller naming itself is its
    // own record, read with its token (the vendor's customers are made so, with no read and no lock).
    // Another parent is a customer whose partner this is, or a mistake: read locked for update at
    // once, as the bound on its partners is counted under that lock (limits.ts).
    const parent = parentId === p.organization.organization_id ? p.organization : await tx.find('organizations', parentId, 'update')
    if (!parent) throw notFound('Parent organization')
    if (parent.organization_type === 'partner') {
      throw badRequest('invalid_parent', 'A partner cannot have partners: parent_id must be the vendor or a customer.', [
        { path: 'body.parent_id', message: 'Must be the vendor or a customer' },
      ])
    }
    return parent
  }

  updateDescription(org: Organization, description: string, actor: Actor): Promise<Organization> {
    return changeRecord(this.storage, actor, 'organizations', org.organization_id, 'organization.update', () => ({ description }))
  }

  setState(org: Organization, state: 'active' | 'suspended', actor: Actor): Promise<Organization> {
    // An organization's type never changes, so this needs no transaction of its own.
    if (org.organization_type === 'vendor') {
      return Promise.reject(conflict('vendor_always_active', 'The vendor organization cannot be suspended or activated.'))
    }
    return transition(this.storage, actor, 'organizations', org.organization_id, state)
  }

  setDefaultEnvironment(org: Organization, name: string, actor: Actor): Promise<Organization> {
    return this.changeEnvironments(org, actor, 'organization_environments.set_default', async (envs) => {
      if (!envs.supported.includes(name)) throw conflict('environment_not_supported', `${name} is not a supported environment of this organization.`)
      return envs.default === name ? null : { default: name, supported: envs.supported }
    })
  }

  addEnvironment(org: Organization, name: string, actor: Actor): Promise<Organization> {
    return this.changeEnvironments(org, actor, 'organization_environments.add', async (envs) => {
      if (envs.supported.includes(name)) throw conflict('environment_exists', `${name} is already a supported environment.`)
      if (envs.supported.length >= MAX_ENVIRONMENTS) throw conflict('too_many_environments', `A customer has at most ${MAX_ENVIRONMENTS} environments; remove one first.`)
      return { default: envs.default, supported: [...envs.supported, name].sort() }
    })
  }

  removeEnvironment(org: Organization, name: string, actor: Actor): Promise<Organization> {
    return this.changeEnvironments(org, actor, 'organization_environments.remove', async (envs, tx) => {
      if (!envs.supported.includes(name)) throw notFound(`Environment ${name}`)
      if (envs.default === name) throw conflict('environment_is_default', `${name} is the default environment; set another default first.`)
      if (await tx.exists('applications', [{ field: 'organization_id', in: [org.organization_id] }, { field: 'environments', has: name }])) {
        throw conflict('environment_in_use', `${name} is still used by an application of this organization.`)
      }
      return { default: envs.default, supported: envs.supported.filter((n) => n !== name) }
    })
  }

  /** `decide` returns the new set, or null when nothing changes (answered 200, nothing written, no event). */
  private changeEnvironments(
    org: Organization,
    actor: Actor,
    action: 'organization_environments.add' | 'organization_environments.remove' | 'organization_environments.set_default',
    decide: (envs: EnvironmentSet, tx: Tx) => Promise<EnvironmentSet | null>,
  ): Promise<Organization> {
    return changeRecord(this.storage, actor, 'organizations', org.organization_id, action, async (current, tx) => {
      const environments = await decide(current.environments!, tx)
      return environments ? { environments } : null
    })
  }
}
