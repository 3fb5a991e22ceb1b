/** The load's model: roles, one request and its expected answer (a step), what the clients know of each tenant's records. */
import type { LoadClient } from './client'

export type Role = 'admin' | 'application_admin' | 'viewer' | 'partner' | 'vendor' | 'vendor_viewer'
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Body = any

export type Scenario = 'normal' | 'cross-tenant' | 'out-of-scope' | 'forbidden' | 'conflict' | 'suspended-app' | 'not-enabled'

export interface Problem {
  readonly category: 'cross-tenant data' | 'wrong answer'
  readonly message: string
}
export const leak = (message: string): Problem => ({ category: 'cross-tenant data', message })
export const wrong = (message: string): Problem => ({ category: 'wrong answer', message })

export interface Step {
  /** The latency bucket: method and route. */
  readonly kind: string
  readonly scenario: Scenario
  readonly role: Role
  readonly method: string
  readonly path: string
  readonly body?: unknown
  readonly expect: number
  /** Checks a 2xx answer with the expected status; null if it is right. */
  readonly check?: (body: Body) => Problem | null
  /** Updates the model from the expected 2xx answer. */
  readonly done?: (body: Body) => void
  /** After an unexpected answer to a write: the record's state is unknown from now on. */
  readonly taint?: () => void
}

export interface AppModel {
  readonly id: string
  state: 'active' | 'suspended'
  description: string
  environments: string[]
}

export interface EnrollmentModel {
  readonly id: string
  readonly consumer: string
  readonly installation: string
  readonly app: AppModel
  readonly environment: string
  state: 'active' | 'suspended'
  keysets: string[]
}

export interface ConsumerModel {
  state: 'active' | 'suspended'
}

export type InstallationState = 'unregistered' | 'verified' | 'suspended'

export interface InstallationModel {
  state: InstallationState
  description: string
}

export interface Tenant {
  readonly index: number
  readonly customerId: string
  readonly envEnabled: boolean
  /** The partner whose token the clients use (never suspended). */
  readonly partnerId: string
  /** A partner no token belongs to: its state is toggled. */
  readonly togglePartnerId: string
  readonly tokens: Record<'admin' | 'application_admin' | 'viewer' | 'partner', string>
  readonly clients: LoadClient[]
  /** Partners created during the run. */
  readonly newPartners: string[]
  customerDescription: string
  togglePartnerState: 'active' | 'suspended'
  defaultEnvironment: string
  scratch: boolean
}

export const ORG_ENVIRONMENTS = 'DEV,PROD,TEST'
export const ENROLLMENT_ENVIRONMENTS = ['PROD', 'TEST']

export const sortedList = (names: Iterable<string>) => [...names].sort().join(',')
