/**
 * One in-memory table: records by primary key, plus secondary indexes that keep record ids in
 * creation order per key. Records are immutable values: a change replaces the stored object, which
 * is what lets a snapshot serialise a point-in-time view while writes go on.
 *
 * Creation order is the order of `created`, which the clock makes strictly increasing, so every index
 * list stays sorted simply by appending; an index never needs re-sorting.
 */
export type IndexKeys<T> = (record: T) => string | readonly string[] | null | undefined

export interface TableDefinition<T> {
  readonly name: string
  readonly key: (record: T) => string
  /** Secondary indexes by name: the key(s) a record is listed under. Keys must not change after creation. */
  readonly indexes?: Readonly<Record<string, IndexKeys<T>>>
}

/** Called before a record is replaced or removed; the snapshot writer uses it to keep pre-images. */
export type ChangeObserver<T> = (id: string, previous: T | undefined) => void

export class Table<T> {
  readonly name: string
  readonly keyOf: (record: T) => string
  private readonly rows = new Map<string, T>()
  private readonly order: string[] = []
  private readonly indexDefs: [string, IndexKeys<T>][]
  private readonly indexes = new Map<string, Map<string, string[]>>()
  observer: ChangeObserver<T> | undefined

  constructor(definition: TableDefinition<T>) {
    this.name = definition.name
    this.keyOf = definition.key
    this.indexDefs = Object.entries(definition.indexes ?? {})
    for (const [name] of this.indexDefs) this.indexes.set(name, new Map())
  }

  get size(): number {
    return this.rows.size
  }

  get(id: string): T | undefined {
    return this.rows.get(id)
  }

  has(id: string): boolean {
    return this.rows.has(id)
  }

  /** Inserts or replaces. Returns the previous version (undefined for an insert). */
  put(record: T): T | undefined {
    const id = this.keyOf(record)
    const previous = this.rows.get(id)
    this.observer?.(id, previous)
    this.rows.set(id, record)
    if (previous === undefined) {
      this.order.push(id)
      for (const [name, keysOf] of this.indexDefs) {
        for (const key of keyList(keysOf(record))) appendTo(this.indexes.get(name)!, key, id)
      }
    }
    return previous
  }

  /** Removes a record; only used to undo an insert whose log write failed, so it is near the tail. */
  remove(id: string): void {
    const previous = this.rows.get(id)
    if (previous === undefined) return
    this.observer?.(id, previous)
    this.rows.delete(id)
    removeFromTail(this.order, id)
    for (const [name, keysOf] of this.indexDefs) {
      const index = this.indexes.get(name)!
      for (const key of keyList(keysOf(previous))) {
        const ids = index.get(key)
        if (!ids) continue
        removeFromTail(ids, id)
        if (ids.length === 0) index.delete(key)
      }
    }
  }

  /** Every id in creation order. The array is live: do not modify it; copy it to keep a view. */
  ids(): readonly string[] {
    return this.order
  }

  /** Ids listed under `key` in index `index`, in creation order (live array, do not modify). */
  idsBy(index: string, key: string): readonly string[] {
    const byKey = this.indexes.get(index)
    if (!byKey) throw new Error(`table ${this.name} has no index ${index}`)
    return byKey.get(key) ?? EMPTY
  }

  /** Records in creation order. */
  *values(): IterableIterator<T> {
    for (const id of this.order) yield this.rows.get(id)!
  }
}

const EMPTY: readonly string[] = Object.freeze([])

function keyList(keys: string | readonly string[] | null | undefined): readonly string[] {
  if (keys === null || keys === undefined) return EMPTY
  return typeof keys === 'string' ? [keys] : keys
}

function appendTo(index: Map<string, string[]>, key: string, id: string): void {
  const ids = index.get(key)
  if (ids) ids.push(id)
  else index.set(key, [id])
}

function removeFromTail(ids: string[], id: string): void {
  const at = ids.lastIndexOf(id)
  if (at !== -1) ids.splice(at, 1)
}
