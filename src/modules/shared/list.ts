/**
 * Filtered, paged lists over a table. Each filter says how many ids it can match at most and can
 * test a record; the most selective one that can enumerate its ids drives the query, the rest
 * test its candidates. So a page costs in proportion to the smallest matching set (an index list
 * when there is one), never to the whole table; with a single index list and nothing else to
 * test (the caller's scope is implied by keys already checked against it), a page is a slice.
 * `total` counts matching ids, not response objects.
 */
import type { Table } from '../../store/table'

export interface Filter<T> {
  /** How many ids this filter can match at most; the smallest enumerable filter drives. */
  readonly estimate: number
  /** Its ids; `ordered` when in creation order already (an index list). Absent: test-only filter. */
  readonly candidates?: () => { ids: Iterable<string>; ordered: boolean }
  readonly test: (record: T) => boolean
  /** The caller's scope (a customer's own records): implied by a driver that is `withinScope`. */
  readonly isScope?: boolean
  /** Every id it yields is in the caller's scope (its keys were checked against it). */
  readonly withinScope?: boolean
}

export interface Paging {
  /** 1-based; absent means the first page. */
  readonly page?: number
  readonly pageSize: number
  readonly order: 'asc' | 'desc'
}

export interface Page<T> {
  readonly items: T[]
  readonly total: number
}

export function listPage<T extends { created: number }>(table: Table<T>, filters: readonly Filter<T>[], paging: Paging): Page<T> {
  const enumerable = filters.filter((f) => f.candidates).sort((a, b) => a.estimate - b.estimate)
  const driver = enumerable[0]
  // A driver inside the scope makes the scope test redundant: then one index list pages by slicing.
  const tests = filters.filter((f) => f !== driver && !(f.isScope && driver?.withinScope)).map((f) => f.test)
  const source = driver ? driver.candidates!() : { ids: table.ids(), ordered: true }
  const offset = ((paging.page ?? 1) - 1) * paging.pageSize

  if (source.ordered && tests.length === 0 && Array.isArray(source.ids)) {
    const ids = source.ids as readonly string[]
    return { items: slice(ids, offset, paging).map((id) => table.get(id)!), total: ids.length }
  }

  const matched: T[] = []
  const seen = source.ordered ? null : new Set<string>()
  for (const id of source.ids) {
    if (seen) {
      if (seen.has(id)) continue
      seen.add(id)
    }
    const record = table.get(id)
    if (record !== undefined && tests.every((test) => test(record))) matched.push(record)
  }
  if (!source.ordered) matched.sort((a, b) => a.created - b.created)
  return { items: slice(matched, offset, paging), total: matched.length }
}

/** The page at `offset` in creation order, or counted from the end for `desc`. */
function slice<E>(items: readonly E[], offset: number, paging: Paging): E[] {
  if (paging.order === 'asc') return items.slice(offset, offset + paging.pageSize)
  const end = items.length - offset
  return end <= 0 ? [] : items.slice(Math.max(0, end - paging.pageSize), end).reverse()
}

/** Ids listed under any of `keys` in one index of `table`. */
export function indexFilter<T>(table: Table<T>, index: string, keys: readonly string[], keyOf: (r: T) => string): Filter<T> {
  const wanted = new Set(keys)
  const lists = keys.map((key) => table.idsBy(index, key))
  return {
    estimate: lists.reduce((sum, ids) => sum + ids.length, 0),
    candidates: () => (lists.length === 1 ? { ids: lists[0]!, ordered: true } : { ids: lists.flat(), ordered: false }),
    test: (record) => wanted.has(keyOf(record)),
  }
}

/** Records whose own id is one of `ids`. */
export function idFilter<T>(table: Table<T>, ids: readonly string[]): Filter<T> {
  const wanted = new Set(ids)
  return {
    estimate: wanted.size,
    candidates: () => ({ ids: wanted, ordered: false }),
    test: (record) => wanted.has(table.keyOf(record)),
  }
}

/**
 * Records related to any of `keys` through another table, e.g. consumers that have an enrollment
 * in one of some applications: enumerated from the other table (`lookup` gives its ids for a
 * key), tested through the record's own few related rows (`relatedOf`).
 */
export function relatedFilter<T, R>(options: {
  readonly via: Table<R>
  readonly lookup: (key: string) => readonly string[]
  readonly keys: readonly string[]
  readonly target: (related: R) => string
  readonly relatedOf: (record: T) => Iterable<R>
  readonly keyOf: (related: R) => string
}): Filter<T> {
  const wanted = new Set(options.keys)
  const lists = [...wanted].map(options.lookup)
  return {
    estimate: lists.reduce((sum, ids) => sum + ids.length, 0),
    candidates: () => ({
      ids: (function* () {
        for (const ids of lists) for (const id of ids) yield options.target(options.via.get(id)!)
      })(),
      ordered: false,
    }),
    test: (record) => {
      for (const related of options.relatedOf(record)) if (wanted.has(options.keyOf(related))) return true
      return false
    },
  }
}

/** The filter as the caller's scope, see `withinScope`. */
export const asScope = <T>(filter: Filter<T>): Filter<T> => ({ ...filter, isScope: true })

/** The filter's keys were all checked to be in the caller's scope: its records are too. */
export const inScope = <T>(filter: Filter<T>): Filter<T> => ({ ...filter, withinScope: true })

/**
 * The caller's scope: for a customer (or its partner), its own records through `filterOn`; none for
 * the vendor, which reaches everything.
 */
export function scopeFilters<T>(customerId: string | null, filterOn: (keys: readonly string[]) => Filter<T>): Filter<T>[] {
  return customerId === null ? [] : [asScope(filterOn([customerId]))]
}

/**
 * A filter on keys naming customer-owned records (organizations, applications, consumers, ...).
 * For a customer only the keys it owns count (another tenant's match nothing), which puts every
 * match inside its scope; for the vendor, all of them.
 */
export function ownedKeysFilter<T>(
  customerId: string | null,
  keys: readonly string[],
  ownerOf: (key: string) => string | undefined,
  filterOn: (keys: readonly string[]) => Filter<T>,
): Filter<T> {
  return customerId === null ? filterOn(keys) : inScope(filterOn(keys.filter((key) => ownerOf(key) === customerId)))
}

/** A test-only filter (state, description search): never drives. */
export function predicate<T>(test: (record: T) => boolean): Filter<T> {
  return { estimate: Infinity, test }
}
