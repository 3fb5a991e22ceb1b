/** The model: what each record should look like, and how a record read back is compared with it. */

export type Kind = 'organization' | 'environments' | 'application' | 'consumer' | 'installation' | 'enrollment' | 'keyset' | 'token'
export type Fields = Record<string, unknown>

/** In a pending effect: the field changes to a value we cannot know (a new keyset's id). */
export const ANY = Symbol('any')

/** The fields each kind is compared on: the view the verification reads back. */
export const VIEW_FIELDS: Record<Kind, readonly string[]> = {
  organization: ['description', 'state', 'created', 'modified'],
  environments: ['default', 'supported'],
  application: ['organization_id', 'description', 'allowed_environments', 'state', 'created', 'modified'],
  consumer: ['state', 'created', 'modified'],
  installation: ['description', 'state', 'created', 'modified'],
  enrollment: [
    'installation_id',
    'consumer_id',
    'application_id',
    'environment',
    'nickname',
    'active_keyset_id',
    'client_enclave_key',
    'state',
    'created',
    'modified',
  ],
  keyset: ['enrollment_id', 'environment', 'state', 'created'],
  token: ['organization_id', 'role', 'state', 'created'],
}

export interface Tracked {
  readonly kind: Kind
  readonly id: string
  /** The state the latest acknowledged write established; null while only an unanswered create made it. */
  acked: Fields | null
  /** Set when an acknowledged change's answer does not show `modified`: it is newer than this. */
  modifiedAfter: string | null
  /** What the unanswered write to this record, if any, would have changed. */
  pending: Fields | null
}

export function pick(kind: Kind, body: Fields): Fields {
  const fields: Fields = {}
  for (const name of VIEW_FIELDS[kind]) if (body[name] !== undefined) fields[name] = body[name]
  return fields
}

export function sameValue(actual: unknown, expected: unknown): boolean {
  return expected === ANY || JSON.stringify(actual) === JSON.stringify(expected)
}

/** `actual` has every field of `expected`, and (if given) a `modified` newer than `after`. */
export function matches(actual: Fields, expected: Fields, after: string | null): boolean {
  for (const [name, value] of Object.entries(expected)) if (!sameValue(actual[name], value)) return false
  if (after !== null && expected.modified === undefined && actual.modified !== undefined && !(String(actual.modified) > after)) return false
  return true
}

export const show = (fields: Fields | null) => JSON.stringify(fields, (_, v) => (v === ANY ? '<any>' : v))

/** An unanswered create of a record whose id the server picks: it may have happened. */
export interface UnknownCreate {
  readonly kind: 'organization' | 'application' | 'keyset' | 'token'
  /** What the record would look like (compared fields). */
  readonly fields: Fields
  /** Takes the record on when it turns out to exist. */
  readonly adopt: (id: string) => void
}
