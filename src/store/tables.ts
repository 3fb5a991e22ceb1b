/**
 * The embedded store's tables: the record shapes of src/storage/records.ts, each with the indexes
 * its lookups and lists need. An index is declared by the fields it is keyed on, so the list
 * planner (src/storage/embedded/planner.ts) can tell which conditions an index answers.
 */
import { Table, type TableDefinition } from './table'
import { AuditEventTable } from './audit-table'
import { PRIMARY_KEY, TABLE_NAMES, type Enrollment, type RecordOf, type RecordTypes, type TableName } from '../storage/records'


/** Index name → the fields it is keyed on (a composite key joins them with `|`). */
export type IndexFields<N extends TableName> = Readonly<Record<string, readonly (keyof RecordOf<N> & string)[]>>

export const INDEX_FIELDS: { readonly [N in TableName]: IndexFields<N> } = {
  organizations: { parent: ['parent_id'] },
  applications: { organization: ['organization_id'] },
  consumers: { organization: ['organization_id'] },
  installations: { organization: ['organization_id'] },
  enrollments: {
    organization: ['organization_id'],
    application: ['application_id'],
    consumer: ['consumer_id'],
    installation: ['installation_id'],
  },
  keysets: { enrollment: ['enrollment_id'], applicationEnvironment: ['application_id', 'environment'] },
  tokens: { organization: ['organization_id'] },
  // Audit events have a table of their own, with its own indexes (audit-table.ts).
  audit_events: {},
}

/**
 * The index keyed on the field that scopes each table's records, for reads within a scope
 * (`Reader.find`'s `within`, src/modules/shared/scope.ts): such a read looks among that owner's
 * records only (table.ts `getOwned`), so another tenant's id is a miss exactly like an unknown one
 * (docs/security.md).
 */
const OWNER_INDEXES: { readonly [N in TableName]?: string } = {
  organizations: 'parent',
  applications: 'organization',
  consumers: 'organization',
  installations: 'organization',
  enrollments: 'organization',
  tokens: 'organization',
}

/** The key a record is listed under in an index of `fields`; null (not listed) when a field is null. */
export function indexKey(record: object, fields: readonly string[]): string | null {
  const values = record as Record<string, unknown>
  if (fields.length === 1) return (values[fields[0]!] as string | null | undefined) ?? null
  const parts: string[] = []
  for (const field of fields) {
    const value = values[field]
    if (value === null || value === undefined) return null
    parts.push(String(value))
  }
  return parts.join('|')
}

/** Data dirs written before the nickname was derived hold it in every enrollment: drop it. */
function decodeEnrollment(stored: Record<string, unknown>): Enrollment {
  if (!('nickname' in stored)) return stored as unknown as Enrollment
  const { nickname: _derived, ...enrollment } = stored
  return enrollment as unknown as Enrollment
}

function definition<N extends TableName>(name: N): TableDefinition<RecordOf<N>> {
  const key = PRIMARY_KEY[name] as string
  const ownerIndex = OWNER_INDEXES[name]
  return {
    name,
    key: (record) => (record as unknown as Record<string, string>)[key]!,
    ...(ownerIndex ? { owner: { index: ownerIndex, field: (INDEX_FIELDS[name] as Record<string, readonly string[]>)[ownerIndex]![0]! } } : {}),
    indexes: Object.fromEntries(Object.entries(INDEX_FIELDS[name]).map(([index, fields]) => [index, (record: object) => indexKey(record, fields)])),
    ...(name === 'enrollments' ? { decode: decodeEnrollment as unknown as (stored: Record<string, unknown>) => RecordOf<N> } : {}),
  }
}

export type Tables = { [N in Exclude<TableName, 'audit_events'>]: Table<RecordTypes[N]> } & { audit_events: AuditEventTable }

export function createTables(): Tables {
  return Object.fromEntries(TABLE_NAMES.map((name) => [name, name === 'audit_events' ? new AuditEventTable() : new Table(definition(name))])) as unknown as Tables
}
