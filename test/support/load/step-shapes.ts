/**
 * Step shapes several resources share, written once: creating a consumer or installation (or
 * sending an existing id again), changing a record's state, changing its description.
 */
import type { LoadClient } from './client'
import { wrong, type Body, type Role, type Step } from './model'

// Creating a consumer or an installation --------------------------------------------------------

/** What `createOrRepeatStep` needs to know of the resource. */
export interface CreatedResource<M> {
  readonly resource: 'consumer' | 'installation'
  /** A client's records of this resource. */
  readonly records: (client: LoadClient) => Map<string, M>
  /** What the body carries besides the id and organization_id. */
  readonly fields: Record<string, unknown>
  /** The model of the record this step creates, if it creates one. */
  readonly created: M
  /** The answer's record is as the model says. */
  readonly matches: (record: Body, model: M) => boolean
  /** The model, for a failure message. */
  readonly describe: (model: M) => string
}

/**
 * POST of a consumer or installation: sometimes another customer's id (409, nothing changes); else a
 * new record while the client's budget lasts (201); once it is spent, one of its ids again (200).
 */
export function createOrRepeatStep<M>(client: LoadClient, spec: CreatedResource<M>): Step | null {
  const { resource, records } = spec
  const collection = `/api/${resource}s`
  const role = client.writer()
  // The vendor must name the customer; the customer's own tokens may.
  const named = role === 'vendor' || client.random.chance(0.3) ? { organization_id: client.customerId } : {}
  const post = (id: string) => ({ kind: `POST ${collection}`, role, method: 'POST', path: collection, body: { [`${resource}_id`]: id, ...spec.fields, ...named } })
  const isRecord = (b: Body, id: string, model: M) => b[resource]?.[`${resource}_id`] === id && spec.matches(b[resource], model)

  if (client.random.chance(0.12)) {
    // Another customer's id: 409, and nothing changes.
    const other = client.someClient(client.run.otherTenant(client.tenant, client.random))
    const id = other.pickKey(records(other))
    if (!id) return null
    return { ...post(id), scenario: 'conflict', expect: 409 }
  }
  const budget = `${resource}s` as const
  // A new record.
  if (client.budget[budget] > 0) {
    client.budget[budget]--
    const id = crypto.randomUUID()
    client.run.owner.set(id, client.tenant.index)
    return {
      ...post(id),
      scenario: 'normal',
      expect: 201,
      check: (b) => (isRecord(b, id, spec.created) ? null : wrong(`not the new ${resource}`)),
      done: () => {
        records(client).set(id, spec.created)
        client.run.noteCreated()
      },
      taint: () => client.run.uncertain.add(id),
    }
  }
  // The budget is spent: one of the client's ids again, answered with the existing record unchanged
  // (an installation keeps its description, not the one sent now).
  const id = client.pickKey(records(client))
  if (!id) return null
  const model = records(client).get(id)!
  return {
    ...post(id),
    scenario: 'normal',
    expect: 200,
    check: (b) => (isRecord(b, id, model) ? null : wrong(`expected the existing ${resource}, ${spec.describe(model)}`)),
    taint: () => client.run.uncertain.add(id),
  }
}

// Changing a record's state ---------------------------------------------------------------------

/** Usually the other of active and suspended; with `noOpChance`, the state it has (a deliberate no-op). */
export function nextActiveState(client: LoadClient, current: 'active' | 'suspended', noOpChance: number): 'active' | 'suspended' {
  if (client.random.chance(noOpChance)) return current
  return current === 'active' ? 'suspended' : 'active'
}

export const activateOrSuspend = (to: 'active' | 'suspended') => (to === 'active' ? 'activate' : 'suspend')

export interface StateChange {
  readonly resource: 'consumer' | 'installation' | 'enrollment' | 'application' | 'organization'
  readonly id: string
  /** The path's last segment: activate, suspend, verify. */
  readonly action: string
  /** The record's state now: if it is `to` already, the change is a no-op (409). */
  readonly from: string
  readonly to: string
  readonly role: Role
  /** The answer shows the record in state `to`. */
  readonly shows: (answer: Body) => boolean
  readonly done: () => void
  readonly taint?: () => void
  /** An enrollment of a suspended application: 401, whatever its own state. */
  readonly appSuspended?: boolean
}

/** PATCH …/{id}/{action}: 200 and the new state; a record already in that state: 409. */
export function stateChangeStep(change: StateChange): Step {
  const { resource, to, appSuspended } = change
  const noOp = change.from === to
  return {
    kind: `PATCH /api/${resource}s/{id}/{action}`,
    scenario: appSuspended ? 'suspended-app' : noOp ? 'conflict' : 'normal',
    role: change.role,
    method: 'PATCH',
    path: `/api/${resource}s/${change.id}/${change.action}`,
    expect: appSuspended ? 401 : noOp ? 409 : 200,
    check: (b) => (change.shows(b) ? null : wrong(`expected ${to}`)),
    done: change.done,
    taint: change.taint,
  }
}

// Changing a description ------------------------------------------------------------------------

/** PATCH /api/{resource}s/{id} with a new description: 200, that description and the state unchanged. */
export function descriptionUpdateStep(
  client: LoadClient,
  resource: 'installation' | 'application',
  id: string,
  model: { state: string; description: string },
  role: Role,
  description: string,
): Step {
  return {
    kind: `PATCH /api/${resource}s/{id}`,
    scenario: 'normal',
    role,
    method: 'PATCH',
    path: `/api/${resource}s/${id}`,
    body: { description },
    expect: 200,
    check: (b) => (b[resource]?.description === description && b[resource].state === model.state ? null : wrong(`expected ${model.state} "${description}"`)),
    done: () => (model.description = description),
    taint: () => client.run.uncertain.add(id),
  }
}
