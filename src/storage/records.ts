/**
 * The stored record shapes, the same for every storage implementation (docs/storage.md).
 * Timestamps are integer microseconds since the epoch, set by the storage, never by a caller.
 */
/**
 * Every identifier is a UUID, accepted in any case and stored and answered lowercase (docs/api.md,
 * "Conventions"): the two patterns, spelled without flags so that JSON Schema reads them too.
 */
export const UUID_ANY_CASE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/
export const UUID_LOWERCASE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

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

export type Role = 'admin' | 'application_admin' | 'viewer'

/**
 * A bearer token's record (docs/api.md "Tokens"). The token string itself is shown once and never
 * stored: only its SHA-256 (`token_hash`), which cannot be used to authenticate (src/auth/tokens.ts).
 * `expired` is not a stored state: it is derived from `expires` when the record is answered.
 */
export interface Token {
  readonly token_id: string
  /** The organization the token acts for. */
  readonly organization_id: string
  readonly role: Role
  readonly description: string | null
  readonly state: 'active' | 'revoked'
  /** Microseconds, like the other timestamps. */
  readonly expires: number
  /** SHA-256 of the whole token string, hex. Never answered, logged or put in an event. */
  readonly token_hash: string
  readonly created: number
  readonly modified: number
}

/**
 * One audit event (docs/api.md "Audit events"), stored flat so that every list filter is a plain
 * condition; the answer nests `actor` and `target`. `created` is the event's `time`, the same
 * instant as the change it records (written in the same transaction). Never changed once written;
 * only retention drops it (`Storage.purgeAuditEvents`).
 */
export interface AuditEvent {
  readonly event_id: string
  /** `<type>.<verb>`, e.g. `consumer.create`. */
  readonly action: string
  readonly target_type: string
  readonly target_id: string
  /** Who acted: a token (organization, token, role) or a CLI command (`actor_cli`); the others null. */
  readonly actor_organization_id: string | null
  readonly actor_token_id: string | null
  readonly actor_role: Role | null
  readonly actor_cli: string | null
  /** The customer whose data changed; null for the vendor's own organization and tokens. */
  readonly customer_id: string | null
  /** Field → [before, after]; never a secret or a hash of one. */
  readonly changes: Readonly<Record<string, readonly [unknown, unknown]>>
  /** The `x-trace-id` of the request that made the change; null for the CLI. */
  readonly trace_id: string | null
  readonly created: number
  readonly modified: number
}

export interface RecordTypes {
  organizations: Organization
  applications: Application
  consumers: Consumer
  installations: Installation
  enrollments: Enrollment
  keysets: Keyset
  tokens: Token
  audit_events: AuditEvent
}
export type TableName = keyof RecordTypes
export type RecordOf<N extends TableName> = RecordTypes[N]

/** Each table's primary key field. */
export const PRIMARY_KEY = {
  organizations: 'organization_id',
  applications: 'application_id',
  consumers: 'consumer_id',
  installations: 'installation_id',
  enrollments: 'enrollment_id',
  keysets: 'keyset_id',
  tokens: 'token_id',
  audit_events: 'event_id',
} as const satisfies { [N in TableName]: keyof RecordOf<N> }

export const TABLE_NAMES = Object.keys(PRIMARY_KEY) as TableName[]

/** The table of each target type of an audit event (an action's first word: src/modules/shared/audit.ts `targetTypeOf`). */
export const TARGET_TABLES = {
  organization: 'organizations',
  application: 'applications',
  consumer: 'consumers',
  installation: 'installations',
  enrollment: 'enrollments',
  keyset: 'keysets',
  token: 'tokens',
} as const satisfies Readonly<Record<string, TableName>>

export type EnrollmentTuple = Pick<Enrollment, 'consumer_id' | 'installation_id' | 'application_id' | 'environment'>

/** docs/api.md "Enrollments": `<installation_id>:<consumer_id>:<application_id>:<ENVIRONMENT>`, always generated. */
export const enrollmentNickname = (e: EnrollmentTuple) => `${e.installation_id}:${e.consumer_id}:${e.application_id}:${e.environment}`

export const sameEnrollmentTuple = (a: EnrollmentTuple, b: EnrollmentTuple) =>
  a.consumer_id === b.consumer_id && a.installation_id === b.installation_id && a.application_id === b.application_id && a.environment === b.environment
