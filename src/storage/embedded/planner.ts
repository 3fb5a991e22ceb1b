/**
 * The embedded answer to a list query (docs/storage.md): each condition becomes a filter that says
 * how many ids it can match at most and can test a record; the most selective one that can
 * enumerate its ids drives the query, the others test its candidates. A page therefore costs in
 * proportion to the smallest matching set (an index list where there is one), never to the table.
 *
 * Every identifier in a condition was reduced to the caller's scope before the query was made (the
 * promise of `ListQuery.scope`), so a driver other than the scope itself yields only records inside
 * the scope: the scope test is dropped then, and one index list pages by slicing.
 *
 * A walk over more than WALK_CHUNK candidates yields to the event loop between chunks, so one broad
 * query never holds other requests up for more than a few milliseconds.
 */
import type { Table } from '../../store/table'
import { INDEX_FIELDS, indexKey, type Tables } from '../../store/tables'
import { PRIMARY_KEY } from '../records'
import type { Enrollment, RecordOf, TableName } from '../records'
import { type Condition, type ListQuery, type Maybe, type Page } from '../storage'
import { nextTurn, newSlice } from '../../ops/turns'
import { auditEventExists, listAuditEvents } from './audit-query'

export interface Filter<T> {
  /** How many ids this filter can match at most; the smallest enumerable filter drives. */
  readonly estimate: number
  /** Its ids; `ordered` when in creation order already (one index list). Absent: a test only. */
  readonly candidates?: () => { readonly ids: Iterable<string>; readonly ordered: boolean }
  readonly test: (record: T) => boolean
  /** The caller's scope: redundant when another filter drives (see above). */
  readonly isScope?: boolean
  /** A range of `created`: on candidates in creation order, a slice found by binary search. */
  readonly createdRange?: { readonly from: number; readonly until: number }
}

/** Candidates tested per turn of the event loop (about a millisecond of work). */
export const WALK_CHUNK = 2048

/** Counts of work done, for tests that bound a query's cost (never timed). */
export const plannerWork = { recordsRead: 0, turnsYielded: 0 }

export function listPage<N extends TableName>(tables: Tables, query: ListQuery<N>): Maybe<Page<RecordOf<N>>> {
  if (query.table === 'audit_events') return listAuditEvents(tables.audit_events, query as unknown as ListQuery<'audit_events'>) as Maybe<Page<RecordOf<N>>>
  const table = tables[query.table] as unknown as Table<RecordOf<N>>
  const filters = filtersOf(tables, query.table, query.where)
  if (query.scope) filters.push({ ...indexFilter(table, query.table, ['organization_id'], [[query.scope]]), isScope: true })
  const enumerable = filters.filter((f) => f.candidates).sort((a, b) => a.estimate - b.estimate)
  const driver = enumerable[0]
  let testing = filters.filter((f) => f !== driver && !(f.isScope && driver && !driver.isScope))
  let source = driver ? driver.candidates!() : { ids: table.ids(), ordered: true }
  const range = testing.find((f) => f.createdRange)
  if (range && source.ordered && Array.isArray(source.ids)) {
    source = { ids: withinCreated(table, source.ids as readonly string[], range.createdRange!), ordered: true }
    testing = testing.filter((f) => f !== range)
  }
  const tests = testing.map((f) => f.test)
  const paging = query.page ? { offset: (query.page.number - 1) * query.page.size, size: query.page.size } : { offset: 0, size: Infinity }

  if (source.ordered && tests.length === 0 && Array.isArray(source.ids)) {
    const ids = source.ids as readonly string[]
    plannerWork.recordsRead += Math.max(0, Math.min(paging.size, ids.length - paging.offset))
    return { items: slice(ids, paging.offset, paging.size, query.order).map((id) => table.get(id)!), total: ids.length }
  }
  const walk = new Walk(table, source, tests)
  // The request's slice, whose tenant the walk waits in line as (a walk of no request: a slice of its own).
  const turns = query.slice ?? newSlice()
  const finish = (): Page<RecordOf<N>> => {
    const matched = walk.matched
    if (!source.ordered) matched.sort((a, b) => a.created - b.created || (table.keyOf(a) < table.keyOf(b) ? -1 : 1))
    return { items: slice(matched, paging.offset, paging.size, query.order), total: matched.length }
  }
  if (walk.step()) return finish()
  return (async () => {
    do {
      plannerWork.turnsYielded++
      await nextTurn(turns)
    } while (!walk.step())
    return finish()
  })()
}

/**
 * Whether any record matches: the first one found ends the walk. Rules ask this inside changes (is
 * this enrollment tuple taken, does this environment have keysets), so the common case, plain `in`
 * conditions of one value on single-field indexes, is tested on the shortest index list directly,
 * without building filters; anything else goes through the planner's filters.
 */
export function exists<N extends TableName>(tables: Tables, name: N, where: readonly Condition<N>[]): boolean {
  if (name === 'audit_events') return auditEventExists(tables.audit_events, where as unknown as readonly Condition<'audit_events'>[])
  const table = tables[name] as unknown as Table<RecordOf<N>>
  const shortest = shortestIndexList(table, name, where)
  if (shortest) {
    for (const id of shortest) {
      plannerWork.recordsRead++
      const record = table.get(id) as Record<string, unknown> | undefined
      if (record !== undefined && where.every((condition) => (condition as { in: readonly string[] }).in.includes(record[(condition as { field: string }).field] as string))) return true
    }
    return false
  }
  const filters = filtersOf(tables, name, where)
  const driver = filters.filter((f) => f.candidates).sort((a, b) => a.estimate - b.estimate)[0]
  const tests = filters.filter((f) => f !== driver).map((f) => f.test)
  for (const id of driver ? driver.candidates!().ids : table.ids()) {
    plannerWork.recordsRead++
    const record = table.get(id)
    if (record !== undefined && tests.every((test) => test(record))) return true
  }
  return false
}

/**
 * When every condition is `field in [one value]` and one of the fields has an index of its own: the
 * shortest of those index lists. Undefined otherwise (the planner's general path decides).
 */
function shortestIndexList<N extends TableName>(table: Table<RecordOf<N>>, name: N, where: readonly Condition<N>[]): readonly string[] | undefined {
  let shortest: readonly string[] | undefined
  for (const condition of where) {
    if (!('field' in condition) || !('in' in condition) || condition.in.length !== 1) return undefined
    const index = indexNamed(name, [condition.field])
    if (!index) continue
    const ids = table.idsBy(index, condition.in[0]!)
    if (!shortest || ids.length < shortest.length) shortest = ids
  }
  return shortest
}

/** The ids (in creation order) whose record's `created` is within the range: two binary searches. */
function withinCreated<T>(table: Table<T>, ids: readonly string[], range: { readonly from: number; readonly until: number }): readonly string[] {
  // Each record the searches read is counted as it is read (test/unit/list-cost.test.ts).
  const created = (i: number) => (plannerWork.recordsRead++, (table.get(ids[i]!) as { created: number }).created)
  const start = firstInCreationOrder(ids.length, created, range.from, true)
  const end = Math.max(start, firstInCreationOrder(ids.length, created, range.until, false))
  return start === 0 && end === ids.length ? ids : ids.slice(start, end)
}

/**
 * In a list of `length` items in creation order, whose i-th was created at `createdAt(i)`: the
 * position of the first created at `bound` or later (`atBound`), or after it. A binary search.
 */
export function firstInCreationOrder(length: number, createdAt: (i: number) => number, bound: number, atBound: boolean): number {
  let low = 0
  let high = length
  while (low < high) {
    const mid = (low + high) >>> 1
    if (atBound ? createdAt(mid) < bound : createdAt(mid) <= bound) low = mid + 1
    else high = mid
  }
  return low
}

/**
 * Tests candidates WALK_CHUNK at a time, keeping the matches; never tests an id twice. An array is
 * walked in place by position (no copy, no iterator result per id): a walk over a whole scope is the
 * broadest request a tenant can send, and its garbage is what grows the heap (docs/abuse.md).
 */
class Walk<T> {
  readonly matched: T[] = []
  private readonly list: readonly string[] | null
  /** Where the walk of `list` stops: what was listed when it began (later appends are newer). */
  private end: number
  private readonly endCreated: number
  private position = 0
  private lastCreated = -Infinity
  private listEdits: number
  private readonly iterator: Iterator<string> | null
  private readonly seen: Set<string> | null

  constructor(
    private readonly table: Table<T>,
    source: { readonly ids: Iterable<string>; readonly ordered: boolean },
    private readonly tests: readonly ((record: T) => boolean)[],
  ) {
    this.list = Array.isArray(source.ids) ? (source.ids as readonly string[]) : null
    this.end = this.list ? this.list.length : 0
    this.endCreated = this.end > 0 ? (createdOf(table, this.list![this.end - 1]!) ?? Infinity) : -Infinity
    this.iterator = this.list ? null : source.ids[Symbol.iterator]()
    this.seen = source.ordered ? null : new Set()
    this.listEdits = table.listEdits
  }

  /** Tests the next chunk; true once every candidate has been tested. */
  step(): boolean {
    const list = this.list
    if (!list) {
      for (let n = 0; n < WALK_CHUNK; n++) {
        const next = this.iterator!.next()
        if (next.done) return true
        this.consider(next.value)
      }
      return false
    }
    // Index lists are live: a removal made while the walk yielded shifted them, so the walk finds
    // its place again by creation time (ordered lists are in creation order; the others are copies).
    if (this.table.listEdits !== this.listEdits && !this.seen) {
      this.listEdits = this.table.listEdits
      this.position = firstCreatedAfter(this.table, list, this.lastCreated)
      this.end = firstCreatedAfter(this.table, list, this.endCreated)
    }
    const stop = Math.min(this.position + WALK_CHUNK, this.end, list.length)
    for (; this.position < stop; this.position++) this.consider(list[this.position]!)
    return this.position >= Math.min(this.end, list.length)
  }

  private consider(id: string): void {
    if (this.seen) {
      if (this.seen.has(id)) return
      this.seen.add(id)
    }
    plannerWork.recordsRead++
    const record = this.table.get(id)
    if (record === undefined) return
    this.lastCreated = (record as { created: number }).created
    for (const test of this.tests) if (!test(record)) return
    this.matched.push(record)
  }
}

const createdOf = <T>(table: Table<T>, id: string) => (table.get(id) as { created: number } | undefined)?.created

/** The position of the first id in `ids` (in creation order) created after `created`. */
function firstCreatedAfter<T>(table: Table<T>, ids: readonly string[], created: number): number {
  let removed = false
  const position = firstInCreationOrder(ids.length, (i) => createdOf(table, ids[i]!) ?? ((removed = true), Infinity), created, false)
  if (!removed) return position
  // A list its index left behind (its key down to one id) may hold removed ids: look linearly.
  const found = ids.findIndex((id) => (createdOf(table, id) ?? -Infinity) > created)
  return found === -1 ? ids.length : found
}

/** The page at `offset` in creation order, or counted from the end for `desc`. */
function slice<E>(items: readonly E[], offset: number, size: number, order: 'asc' | 'desc'): E[] {
  if (order === 'asc') return items.slice(offset, offset + size)
  const end = items.length - offset
  return end <= 0 ? [] : items.slice(Math.max(0, end - size), end).reverse()
}

/** One filter per condition; `in` conditions on all the fields of a composite index share one. */
function filtersOf<N extends TableName>(tables: Tables, name: N, where: readonly Condition<N>[]): Filter<RecordOf<N>>[] {
  const table = tables[name] as unknown as Table<RecordOf<N>>
  const valuesOf = new Map<string, readonly string[]>()
  for (const condition of where) if ('field' in condition && 'in' in condition) valuesOf.set(condition.field, condition.in)
  const covered = new Set<string>()
  const filters: Filter<RecordOf<N>>[] = []
  for (const fields of Object.values(INDEX_FIELDS[name]) as (readonly string[])[]) {
    if (fields.length < 2 || !fields.every((field) => valuesOf.has(field))) continue
    filters.push(indexFilter(table, name, fields, fields.map((field) => valuesOf.get(field)!)))
    for (const field of fields) covered.add(field)
  }
  for (const condition of where) {
    if ('enrolled' in condition) filters.push(enrolledFilter(tables, name, condition.enrolled, condition.in))
    else if ('anyOf' in condition) {
      const alternatives = condition.anyOf.map((all) => filtersOf(tables, name, all).map((filter) => filter.test))
      filters.push(predicate((record) => alternatives.some((tests) => tests.every((test) => test(record)))))
    } else if ('in' in condition) {
      if (!covered.has(condition.field)) filters.push(fieldFilter(table, name, condition.field, condition.in))
    } else if ('match' in condition) {
      const { field, text } = condition
      const matches = TEXT_MATCH[condition.match]
      filters.push(predicate((record) => matches(valueOf(record, field) as string, text)))
    } else if ('has' in condition) {
      const { field, has } = condition
      filters.push(predicate((record) => (valueOf(record, field) as readonly string[]).includes(has)))
    } else {
      const { field, from = -Infinity, until = Infinity } = condition
      const test = (record: RecordOf<N>) => (valueOf(record, field) as number) >= from && (valueOf(record, field) as number) <= until
      filters.push(field === 'created' ? { estimate: Infinity, test, createdRange: { from, until } } : predicate(test))
    }
  }
  return filters
}

const TEXT_MATCH = {
  exact: (value: string, text: string) => value === text,
  contains: (value: string, text: string) => value.includes(text),
  startswith: (value: string, text: string) => value.startsWith(text),
}

const valueOf = (record: unknown, field: string) => (record as Record<string, unknown>)[field]

const predicate = <T>(test: (record: T) => boolean): Filter<T> => ({ estimate: Infinity, test })

/** `field` is one of `values`: the primary key, an index of its own, or a test. */
function fieldFilter<N extends TableName>(table: Table<RecordOf<N>>, name: N, field: string, values: readonly string[]): Filter<RecordOf<N>> {
  if (field === PRIMARY_KEY[name]) {
    const wanted = new Set(values)
    return { estimate: wanted.size, candidates: () => ({ ids: wanted, ordered: false }), test: (record) => wanted.has(table.keyOf(record)) }
  }
  if (indexNamed(name, [field])) return indexFilter(table, name, [field], [values])
  const wanted = new Set(values)
  return predicate((record) => wanted.has(valueOf(record, field) as string))
}

/** Records listed in the index on `fields` under any combination of `values` (one list per field). */
function indexFilter<N extends TableName>(
  table: Table<RecordOf<N>>,
  name: N,
  fields: readonly string[],
  values: readonly (readonly string[])[],
): Filter<RecordOf<N>> {
  const index = indexNamed(name, fields)
  if (!index) throw new Error(`table ${name} has no index on ${fields.join(', ')}`)
  let keys: string[] = ['']
  for (const [i, options] of values.entries()) keys = keys.flatMap((prefix) => options.map((value) => (i === 0 ? value : `${prefix}|${value}`)))
  const wanted = new Set(keys)
  const lists = [...wanted].map((key) => table.idsBy(index, key))
  return {
    estimate: lists.reduce((sum, ids) => sum + ids.length, 0),
    candidates: () => (lists.length === 1 ? { ids: lists[0]!, ordered: true } : { ids: lists.flat(), ordered: false }),
    test: (record) => wanted.has(indexKey(record as object, fields) ?? ''),
  }
}

function indexNamed(name: TableName, fields: readonly string[]): string | undefined {
  for (const [index, keyed] of Object.entries(INDEX_FIELDS[name]) as [string, readonly string[]][]) {
    if (keyed.length === fields.length && keyed.every((field, i) => field === fields[i])) return index
  }
  return undefined
}

/**
 * Consumers or installations with an enrollment whose `link` is one of `keys`: enumerated from
 * the enrollments under those keys, tested through the record's own (few) enrollments.
 */
function enrolledFilter<N extends TableName>(tables: Tables, name: N, link: keyof Enrollment & string, keys: readonly string[]): Filter<RecordOf<N>> {
  const enrollments = tables.enrollments
  const side = name === 'consumers' ? 'consumer_id' : name === 'installations' ? 'installation_id' : null
  if (!side) throw new Error(`${name} have no enrollments to filter by`)
  const sideIndex = indexNamed('enrollments', [side])!
  const linkIndex = link === 'enrollment_id' ? null : indexNamed('enrollments', [link])!
  const wanted = new Set(keys)
  const lists = [...wanted].map((key) => (linkIndex ? enrollments.idsBy(linkIndex, key) : enrollments.has(key) ? [key] : []))
  const primaryKey = PRIMARY_KEY[name] as string
  return {
    estimate: lists.reduce((sum, ids) => sum + ids.length, 0),
    candidates: () => ({
      ids: (function* () {
        for (const ids of lists) for (const id of ids) yield enrollments.get(id)![side]
      })(),
      ordered: false,
    }),
    test: (record) => {
      for (const id of enrollments.idsBy(sideIndex, valueOf(record, primaryKey) as string)) {
        if (wanted.has(enrollments.get(id)![link] as string)) return true
      }
      return false
    },
  }
}
