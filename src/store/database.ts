/**
 * The stored record shapes and the tables that hold them, with the indexes the API's lookups and
 * lists need. Timestamps are integer microseconds since the epoch (see clock.ts).
 */
import { Table, type TableDefinition } from './table'

export type OrganizationType = 'vendor' | 'customer' | 'partner'
export type ActiveState = 'active' | 'suspended'
export type InstallationState = 'unregistered' | 'verified' | 'suspended'

export interface EnvironmentSet {
  readonly default: string
  /** Uppercase, sorted, without duplicates. */
  readonly supported: readonly string[]
}

export interface Organization {
  readonly organization_id: string
  readonly parent_id: string | null
  readonly organization_type: OrganizationType
  readonly description: string
  readonly state: ActiveState
  /** Null: not enabled for virtual environments (one implicit `PRODUCTION`). */
  readonly environments: EnvironmentSet | null
  readonly created: number
  readonly modified: number
}

export interface Application {
  readonly application_id: string
  readonly organization_id: string
  readonly description: string
  /** Uppercase, sorted, without duplicates, never empty. */
  readonly environments: readonly string[]
  readonly state: ActiveState
  /** SHA-256 of the api_key, hex; the key itself is shown once and never stored. */
  readonly api_key_hash: string
  readonly created: number
  readonly modified: number
}

export interface Consumer {
  readonly consumer_id: string
  /** The owning customer. */
  readonly organization_id: string
  readonly state: ActiveState
  readonly created: number
  readonly modified: number
}

export interface Installation {
  readonly installation_id: string
  readonly organization_id: string
  readonly description: string
  readonly state: InstallationState
  readonly created: number
  readonly modified: number
}

export interface Enrollment {
  readonly enrollment_id: string
  readonly organization_id: string
  readonly consumer_id: string
  readonly installation_id: string
  readonly application_id: string
  readonly environment: string
  /** No `nickname`: it is always derived from the identifiers (`enrollmentNickname`), so not stored. */
  readonly active_keyset_id: string | null
  readonly client_enclave_key: string | null
  readonly state: ActiveState
  readonly created: number
  readonly modified: number
}

export interface Keyset {
  readonly keyset_id: string
  readonly enrollment_id: string
  readonly application_id: string
  readonly environment: string
  readonly client_enclave_key: string
  readonly state: 'active' | 'retired'
  readonly created: number
  readonly modified: number
}

type EnrollmentTuple = Pick<Enrollment, 'consumer_id' | 'installation_id' | 'application_id' | 'environment'>

/** CONTRACT section 6: `<installation_id>:<consumer_id>:<application_id>:<ENVIRONMENT>`, always generated. */
export const enrollmentNickname = (e: EnrollmentTuple) => `${e.installation_id}:${e.consumer_id}:${e.application_id}:${e.environment}`

export const sameEnrollmentTuple = (a: EnrollmentTuple, b: EnrollmentTuple) =>
  a.consumer_id === b.consumer_id && a.installation_id === b.installation_id && a.application_id === b.application_id && a.environment === b.environment

/** Data dirs written before the nickname was derived hold it in every enrollment: drop it. */
function decodeEnrollment(stored: Record<string, unknown>): Enrollment {
  if (!('nickname' in stored)) return stored as unknown as Enrollment
  const { nickname: _derived, ...enrollment } = stored
  return enrollment as unknown as Enrollment
}

export const applicationEnvironmentKey = (applicationId: string, environment: string) => `${applicationId}|${environment}`

const definitions = {
  organizations: {
    name: 'organizations',
    key: (o) => o.organization_id,
    indexes: { parent: (o) => o.parent_id },
  } satisfies TableDefinition<Organization>,
  applications: {
    name: 'applications',
    key: (a) => a.application_id,
    indexes: { organization: (a) => a.organization_id },
  } satisfies TableDefinition<Application>,
  consumers: {
    name: 'consumers',
    key: (c) => c.consumer_id,
    indexes: { organization: (c) => c.organization_id },
  } satisfies TableDefinition<Consumer>,
  installations: {
    name: 'installations',
    key: (i) => i.installation_id,
    indexes: { organization: (i) => i.organization_id },
  } satisfies TableDefinition<Installation>,
  enrollments: {
    name: 'enrollments',
    key: (e) => e.enrollment_id,
    indexes: {
      organization: (e) => e.organization_id,
      application: (e) => e.application_id,
      consumer: (e) => e.consumer_id,
      installation: (e) => e.installation_id,
    },
    decode: decodeEnrollment,
  } satisfies TableDefinition<Enrollment>,
  keysets: {
    name: 'keysets',
    key: (k) => k.keyset_id,
    indexes: {
      enrollment: (k) => k.enrollment_id,
      applicationEnvironment: (k) => applicationEnvironmentKey(k.application_id, k.environment),
    },
  } satisfies TableDefinition<Keyset>,
}

export type Tables = { [N in keyof RecordTypes]: Table<RecordTypes[N]> }
export interface RecordTypes {
  organizations: Organization
  applications: Application
  consumers: Consumer
  installations: Installation
  enrollments: Enrollment
  keysets: Keyset
}
export type TableName = keyof RecordTypes
export type RecordOf<N extends TableName> = RecordTypes[N]
export const TABLE_NAMES = Object.keys(definitions) as TableName[]

export function createTables(): Tables {
  return {
    organizations: new Table(definitions.organizations),
    applications: new Table(definitions.applications),
    consumers: new Table(definitions.consumers),
    installations: new Table(definitions.installations),
    enrollments: new Table(definitions.enrollments),
    keysets: new Table(definitions.keysets),
  }
}
