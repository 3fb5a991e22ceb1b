/**
 * The SQL text of every statement the PostgreSQL storage sends (docs/storage.md, "PostgreSQL"):
 * per-table statements built once, and list queries turned into one statement each. Values are
 * always parameters; the only names put into the text are the table and column names below, so
 * the text depends on the query's shape, not its values, and Bun prepares each shape once per
 * connection.
 */
import { PRIMARY_KEY, UUID_LOWERCASE, type RecordOf, type TableName } from '../records'
import type { Condition, FieldIn, ListQuery } from '../storage'

type ColumnType = 'uuid' | 'text' | 'text[]' | 'json' | 'jsonb' | 'bigint'

/** Each table's columns, in insert order; `created` and `modified` come last, set here. */
const COLUMNS: { readonly [N in TableName]: Readonly<Record<string, ColumnType>> } = {
  organizations: {
    organization_id: 'uuid',
    parent_id: 'uuid',
    organization_type: 'text',
    description: 'text',
    state: 'text',
    environments: 'jsonb',
  },
  applications: { application_id: 'uuid', organization_id: 'uuid', description: 'text', environments: 'text[]', state: 'text', api_key_hash: 'text' },
  consumers: { consumer_id: 'uuid', organization_id: 'uuid', state: 'text' },
  installations: { installation_id: 'uuid', organization_id: 'uuid', description: 'text', state: 'text' },
  enrollments: {
    enrollment_id: 'uuid',
    organization_id: 'uuid',
    consumer_id: 'uuid',
    installation_id: 'uuid',
    application_id: 'uuid',
    environment: 'text',
    active_keyset_id: 'uuid',
    client_enclave_key: 'text',
    state: 'text',
  },
  keysets: { keyset_id: 'uuid', enrollment_id: 'uuid', application_id: 'uuid', environment: 'text', client_enclave_key: 'text', state: 'text' },
  tokens: {
    token_id: 'uuid',
    organization_id: 'uuid',
    role: 'text',
    description: 'text',
    state: 'text',
    expires: 'bigint',
    token_hash: 'text',
  },
  audit_events: {
    event_id: 'uuid',
    action: 'text',
    target_type: 'text',
    target_id: 'uuid',
    actor_organization_id: 'uuid',
    actor_token_id: 'uuid',
    actor_role: 'text',
    actor_cli: 'text',
    customer_id: 'uuid',
    changes: 'json',
    trace_id: 'text',
  },
}

/**
 * The database clock in integer microseconds, the transaction's start: one time for every record a
 * change writes, as in the embedded store.
 */
const NOW = `(extract(epoch FROM now()) * 1000000)::bigint`

/** That time on its own (`Tx.time`). */
export const TRANSACTION_TIME = `SELECT ${NOW} AS time`

/**
 * The database's time as an instance learns it (`Reader.now`, docs/storage.md "Time"): the clock
 * when the answer is made, not the statement's start, which for a statement held by a lock or a
 * busy server is seconds older than the answer it arrives with.
 */
const CLOCK = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

/** That time on its own, named as the credential reads name it. */
export const TRANSACTION_TIME_AS_NOW = `SELECT ${CLOCK} AS now`

/**
 * Whether `id` can name a record: identifiers are stored as `uuid`, which refuses other text
 * (22P02) and would match an uppercase spelling. Anything else names nothing, as in the embedded
 * store, where a key is compared as it is (identifiers arrive lowercased, docs/api.md "Conventions").
 */
export const isKey = (id: string) => UUID_LOWERCASE.test(id)

/** Each table's bigint columns besides `created` and `modified` (a token's `expires`). */
const BIGINT_COLUMNS: Readonly<Record<string, readonly string[]>> = Object.fromEntries(
  Object.entries(COLUMNS).map(([table, columns]) => [table, Object.keys(columns).filter((column) => columns[column] === 'bigint')]),
)

/** A stored row of `table` as a record: bigint columns come back as strings. */
export function toRecord<N extends TableName>(table: N, row: Record<string, unknown>): RecordOf<N> {
  const record: Record<string, unknown> = { ...row, created: Number(row.created), modified: Number(row.modified) }
  for (const column of BIGINT_COLUMNS[table]!) record[column] = Number(row[column])
  return record as unknown as RecordOf<N>
}

/** The values of a new record's columns, in `COLUMNS` order. */
export const insertValues = (table: TableName, record: object): unknown[] =>
  Object.keys(COLUMNS[table]).map((column) => (record as Record<string, unknown>)[column] ?? null)

export interface TableStatements {
  readonly find: string
  readonly findForShare: string
  readonly findForUpdate: string
  readonly findMany: string
  readonly insert: string
  /** Inserts unless any unique rule is taken (then returns no row). */
  readonly insertIfAbsent: string
}

function tableStatements(table: TableName): TableStatements {
  const key = PRIMARY_KEY[table]
  const columns = Object.keys(COLUMNS[table])
  const placeholders = columns.map((column, i) => `$${i + 1}::${COLUMNS[table][column]}`)
  const insert = `INSERT INTO ${table} (${columns.join(', ')}, created, modified) VALUES (${placeholders.join(', ')}, ${NOW}, ${NOW})`
  const find = `SELECT * FROM ${table} WHERE ${key} = $1::uuid`
  return {
    find,
    findForShare: `${find} FOR SHARE`,
    findForUpdate: `${find} FOR UPDATE`,
    findMany: `SELECT * FROM ${table} WHERE ${key} = ANY($1::uuid[])`,
    insert: `${insert} RETURNING *`,
    // No conflict target: a taken enrollment tuple is waited for and skipped like a taken key, so
    // the caller can tell the two apart by reading the key (see PostgresTx.insertIfAbsent).
    insertIfAbsent: `${insert} ON CONFLICT DO NOTHING RETURNING *`,
  }
}

/** Rows of audit events sent in one statement at most (`appendEventsStatement`). */
export const EVENTS_PER_STATEMENT = 16
const appendEventsStatements: string[] = []

/**
 * The insert of `count` audit events in one statement, `count` up to EVENTS_PER_STATEMENT: a
 * transaction's events go to the database together, with its COMMIT (PostgresTx.appendEvent).
 * Each row's parameters are its columns' values, then its time (`created` and `modified`).
 */
export function appendEventsStatement(count: number): string {
  if (appendEventsStatements[count] === undefined) {
    const columns = Object.keys(COLUMNS.audit_events)
    const width = columns.length + 1
    const row = (r: number) => {
      const time = `$${r * width + width}::bigint`
      return `(${columns.map((column, i) => `$${r * width + i + 1}::${COLUMNS.audit_events[column]}`).join(', ')}, ${time}, ${time})`
    }
    appendEventsStatements[count] = `INSERT INTO audit_events (${columns.join(', ')}, created, modified) VALUES ${Array.from({ length: count }, (_, r) => row(r)).join(', ')}`
  }
  return appendEventsStatements[count]!
}

/** The credential generation (src/storage/postgres/credentials.ts). */
const GENERATION = 'SELECT generation FROM credential_generation'

/** The generation, with the database's time (`Reader.now`: a credential read just before the request's token is judged). */
export const CREDENTIAL_GENERATION = `SELECT (${GENERATION}) AS generation, ${CLOCK} AS now`

/**
 * `Reader.findCredential`: a token, its organization and that one's parent, each row as JSON, and
 * the credential generation they were read at, in the same snapshot; and the database's time.
 */
export const CREDENTIAL =
  `SELECT (${GENERATION}) AS generation, ${CLOCK} AS now, to_jsonb(t) AS token, to_jsonb(o) AS organization, to_jsonb(p) AS parent FROM tokens t ` +
  'LEFT JOIN organizations o ON o.organization_id = t.organization_id ' +
  'LEFT JOIN organizations p ON p.organization_id = o.parent_id WHERE t.token_id = $1::uuid'

/** The column of `findWithParent`'s answer that holds the parent row (no table has a column so named). */
export const PARENT_COLUMN = 'parent_row'

/**
 * `Reader.find` with `within`: the record by key ($1) if it meets the conditions, which are part
 * of the statement, so that a record outside them is dropped by the database like a missing one.
 */
export function findWithinStatement<N extends TableName>(table: N, id: string, within: readonly FieldIn<N>[]): Statement {
  const params: unknown[] = [id]
  return { text: `SELECT t.* FROM ${table} t WHERE t.${PRIMARY_KEY[table]} = $1::uuid AND ${whereClause(table, null, within, params)}`, params }
}

/** `Reader.findMany` with `within`: as `findWithinStatement`, for the keys in $1. */
export function findManyWithinStatement<N extends TableName>(table: N, keys: readonly string[], within: readonly FieldIn<N>[]): Statement {
  const params: unknown[] = [keys]
  return { text: `SELECT t.* FROM ${table} t WHERE t.${PRIMARY_KEY[table]} = ANY($1::uuid[]) AND ${whereClause(table, null, within, params)}`, params }
}

/**
 * `Reader.findWithParent`: the record by key ($1), as `find` answers it (with `within` as there),
 * and in `PARENT_COLUMN` the row its `field` names in `parentTable` as JSON (null when none), in
 * one statement.
 */
export function findWithParentStatement<N extends TableName>(table: N, id: string, field: string, parentTable: TableName, within: readonly FieldIn<N>[] = []): Statement {
  if (COLUMNS[table][field] !== 'uuid') throw new Error(`${table}.${field} names no record`)
  const params: unknown[] = [id]
  const conditions = within.length === 0 ? '' : ` AND ${whereClause(table, null, within, params)}`
  return {
    text:
      `SELECT t.*, to_jsonb(p) AS ${PARENT_COLUMN} FROM ${table} t ` +
      `LEFT JOIN ${parentTable} p ON p.${PRIMARY_KEY[parentTable]} = t.${field} WHERE t.${PRIMARY_KEY[table]} = $1::uuid${conditions}`,
    params,
  }
}

export const STATEMENTS = Object.fromEntries(Object.keys(COLUMNS).map((table) => [table, tableStatements(table as TableName)])) as {
  readonly [N in TableName]: TableStatements
}

const updates = new Map<string, string>()

/**
 * Sets `fields` ($2...) of the record whose key is $1; `modified` strictly increases even when
 * another instance's clock, or this transaction's start, is behind the last change.
 */
export function updateStatement(table: TableName, fields: readonly string[]): string {
  const cacheKey = `${table}:${fields.join(',')}`
  let text = updates.get(cacheKey)
  if (!text) {
    const types = COLUMNS[table]
    for (const field of fields) if (!types[field] || field === PRIMARY_KEY[table]) throw new Error(`${table}.${field} cannot be updated`)
    const sets = fields.map((field, i) => `${field} = $${i + 2}::${types[field]}`)
    text = `UPDATE ${table} SET ${sets.join(', ')}, modified = greatest(${NOW}, modified + 1) WHERE ${PRIMARY_KEY[table]} = $1::uuid RETURNING *`
    updates.set(cacheKey, text)
  }
  return text
}

/** A statement and its parameters. */
export interface Statement {
  readonly text: string
  readonly params: unknown[]
}

/** The enrollment field that names a consumer or an installation. */
const ENROLLED_SIDE: Partial<Record<TableName, string>> = { consumers: 'consumer_id', installations: 'installation_id' }

/** The fields that name whose records they are: the first column of each tenant's own indexes. */
const TENANT_FIELDS: ReadonlySet<string> = new Set(['organization_id', 'customer_id', 'parent_id'])

/** The conditions (and the scope) as one SQL condition over `t`; values appended to `params`. */
function whereClause<N extends TableName>(table: N, scope: string | null | undefined, where: readonly Condition<N>[], params: unknown[]): string {
  const parameter = (value: unknown, type: string) => (params.push(value), `$${params.length}::${type}`)
  const column = (field: string): ColumnType => {
    const type = COLUMNS[table][field] ?? (field === 'created' || field === 'modified' ? 'bigint' : undefined)
    if (!type) throw new Error(`${table} has no field ${field}`)
    return type
  }
  /** One condition as an SQL test of the row `t`. */
  const test = (condition: Condition<N>): string => {
    if ('anyOf' in condition) return `(${condition.anyOf.map((all) => (all.length === 0 ? 'true' : `(${all.map(test).join(' AND ')})`)).join(' OR ') || 'false'})`
    if ('enrolled' in condition) {
      const side = ENROLLED_SIDE[table]
      if (!side) throw new Error(`${table} have no enrollments to filter by`)
      if (!condition.in.some(isKey)) return 'false'
      const values = parameter(condition.in.filter(isKey), 'uuid[]')
      return `EXISTS (SELECT 1 FROM enrollments e WHERE e.${side} = t.${PRIMARY_KEY[table]} AND e.${condition.enrolled} = ANY(${values}))`
    }
    if ('in' in condition) {
      const type = column(condition.field)
      const values = type === 'uuid' ? condition.in.filter(isKey) : condition.in
      if (values.length === 0) return 'false'
      // One tenant as an equality: with `= ANY(array)` PostgreSQL does not read an index that leads
      // with the tenant in the list's order, and paged a customer by walking the table's `created`
      // index through every other tenant's rows. Other fields stay `= ANY`, so that no index of
      // theirs (by action, say) is walked in order through other tenants' rows either: their
      // matches are sorted, among the tenant's own (docs/storage.md, "Lists").
      if (values.length === 1 && TENANT_FIELDS.has(condition.field)) return `t.${condition.field} = ${parameter(values[0], type)}`
      return `t.${condition.field} = ANY(${parameter(values, `${type}[]`)})`
    }
    if ('match' in condition) {
      column(condition.field)
      const text = parameter(condition.text, 'text')
      // Case-sensitive, with no pattern characters to escape (LIKE would treat % and _ specially).
      const tests = { exact: `t.${condition.field} = ${text}`, contains: `strpos(t.${condition.field}, ${text}) > 0`, startswith: `starts_with(t.${condition.field}, ${text})` }
      return tests[condition.match]
    }
    if ('has' in condition) {
      column(condition.field)
      return `${parameter(condition.has, 'text')} = ANY(t.${condition.field})`
    }
    column(condition.field)
    const bounds: string[] = []
    if (condition.from !== undefined) bounds.push(`t.${condition.field} >= ${parameter(condition.from, 'bigint')}`)
    if (condition.until !== undefined) bounds.push(`t.${condition.field} <= ${parameter(condition.until, 'bigint')}`)
    return bounds.length > 0 ? bounds.join(' AND ') : 'true'
  }
  const parts: string[] = []
  if (scope) parts.push(`t.organization_id = ${parameter(scope, 'uuid')}`)
  for (const condition of where) parts.push(test(condition))
  return parts.length > 0 ? parts.join(' AND ') : 'true'
}

/**
 * The columns a list selects: every column, but an audit event's `changes` as text, which the
 * client would otherwise parse in one go for the whole page (a page of big events is megabytes of
 * JSON); `listedRecord` parses each event's in turn, in turns of the event loop
 * (docs/security.md, "Big answers").
 */
const AUDIT_EVENT_COLUMNS = [...Object.keys(COLUMNS.audit_events).map((column) => (column === 'changes' ? 't.changes::text AS changes' : `t.${column}`)), 't.created', 't.modified'].join(', ')
const listedColumns = (table: TableName): string => (table === 'audit_events' ? AUDIT_EVENT_COLUMNS : 't.*')

/** A listed row (`listStatement`) as a record. */
export function listedRecord<N extends TableName>(table: N, row: Record<string, unknown>): RecordOf<N> {
  const record = toRecord(table, row)
  if (table === 'audit_events') (record as unknown as { changes: unknown }).changes = JSON.parse(row.changes as string)
  return record
}

/**
 * One statement for a list query. Paged: one row per record of the page, each carrying `total`;
 * a page past the end is one row of nulls with the total (the count joined to the page, so one
 * round trip answers both).
 */
export function listStatement<N extends TableName>(query: ListQuery<N>): Statement {
  const params: unknown[] = []
  const condition = whereClause(query.table, query.scope, query.where, params)
  const direction = query.order === 'desc' ? 'DESC' : 'ASC'
  const order = `ORDER BY t.created ${direction}, t.${PRIMARY_KEY[query.table]} ${direction}`
  const columns = listedColumns(query.table)
  if (!query.page) return { text: `SELECT ${columns} FROM ${query.table} t WHERE ${condition} ${order}`, params }
  const limit = `$${params.push(query.page.size)}::bigint`
  const offset = `$${params.push((query.page.number - 1) * query.page.size)}::bigint`
  const total = countedTotal(query, params) ?? `SELECT count(*) AS total FROM ${query.table} t WHERE ${condition}`
  return {
    text:
      `SELECT c.total, p.* FROM (${total}) c ` +
      `LEFT JOIN LATERAL (SELECT ${columns} FROM ${query.table} t WHERE ${condition} ${order} LIMIT ${limit} OFFSET ${offset}) p ON true`,
    params,
  }
}

/**
 * The total of a page of enrollments filtered by application alone, from the enrollment counters
 * (migration 5) instead of a count of the rows. Every enrollment of those applications matches:
 * they are the caller's own (the promise of `ListQuery.scope`), and an enrollment belongs to its
 * application's customer.
 */
function countedTotal<N extends TableName>(query: ListQuery<N>, params: unknown[]): string | undefined {
  const [only, ...others] = query.where
  if (query.table !== 'enrollments' || others.length > 0 || !only || !('in' in only) || 'enrolled' in only || only.field !== 'application_id') return undefined
  const ids = `$${params.push(only.in.filter(isKey))}::uuid[]`
  return `SELECT coalesce(sum(enrollments), 0)::bigint AS total FROM enrollment_counts WHERE application_id = ANY(${ids})`
}

/** How many match, counted no further than `atMost` (the last parameter). */
export function countStatement<N extends TableName>(table: N, where: readonly Condition<N>[], atMost: number): Statement {
  const params: unknown[] = []
  const condition = whereClause(table, null, where, params)
  return { text: `SELECT count(*)::int AS n FROM (SELECT 1 FROM ${table} t WHERE ${condition} LIMIT $${params.push(atMost)}::bigint) s`, params }
}

export function existsStatement<N extends TableName>(table: N, where: readonly Condition<N>[]): Statement {
  const params: unknown[] = []
  return { text: `SELECT EXISTS (SELECT 1 FROM ${table} t WHERE ${whereClause(table, null, where, params)}) AS found`, params }
}
