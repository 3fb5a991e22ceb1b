/**
 * One in-memory table: records by primary key, plus secondary indexes that keep record ids in
 * creation order per key (a key with one id holds just the string: no array per unique key).
 * Records are immutable values: a change replaces the stored object, which is what lets a snapshot
 * serialise a point-in-time view while writes go on.
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
  /** Turns a record as read from disk into its current shape (older data dirs may hold more fields). */
  readonly decode?: (stored: Record<string, unknown>) => T
  /**
   * The index whose key is the organization whose scope a record is in (`organization_id`; an
   * organization's `parent_id`), if a read within a scope finds its records (`getOwned`), and the
   * field it is keyed on. Must not change after creation.
   */
  readonly owner?: { readonly index: string; readonly field: string }
}

/** An index entry: the one id listed under a key (most keys have one), or several in creation order. */
type IndexEntry = string | string[]

/** Called before a record is replaced or removed; the snapshot writer uses it to keep pre-images. */
export type ChangeObserver<T> = (id: string, previous: T | undefined) => void

export class Table<T> {
  readonly name: string
  readonly keyOf: (record: T) => string
  private readonly rows = new GenerationalMap<T>()
  private readonly order: string[] = []
  private readonly indexDefs: [string, IndexKeys<T>][]
  private readonly indexes = new Map<string, GenerationalMap<IndexEntry>>()
  private readonly decodeStored: ((stored: Record<string, unknown>) => T) | undefined
  /** The field `getOwned` finds records by (TableDefinition `owner`). */
  readonly ownerField: string | undefined
  private readonly ownerIndex: string | undefined
  /**
   * The records of each owner that a read within its scope has asked for (`getOwned`), by id: made
   * on first use, from the owner's index list, then kept up to date. Not at start-up: about 100
   * bytes a record (docs/performance.md), and many owners may never be read that way.
   */
  private readonly owned = new Map<string, GenerationalMap<T>>()
  observer: ChangeObserver<T> | undefined
  /**
   * Counts the changes that move ids within the table's lists (a removal, or records put back at the
   * head); appends do not count. A walk that yielded over a live list resumes where it was while
   * this is unchanged, and looks its place up again otherwise (src/storage/embedded/planner.ts).
   */
  listEdits = 0

  constructor(definition: TableDefinition<T>) {
    this.name = definition.name
    this.keyOf = definition.key
    this.decodeStored = definition.decode
    this.ownerField = definition.owner?.field
    this.ownerIndex = definition.owner?.index
    this.indexDefs = Object.entries(definition.indexes ?? {})
    for (const [name] of this.indexDefs) this.indexes.set(name, new GenerationalMap())
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

  /**
   * The record `id` if `owner` owns it (TableDefinition `owner`): looked up among that owner's
   * records only, so another owner's id is a miss exactly like an unknown one (docs/security.md).
   */
  getOwned(owner: string, id: string): T | undefined {
    return (this.owned.get(owner) ?? this.collectOwned(owner)).get(id)
  }

  /** `owner`'s records by id, from its index list: the first `getOwned` of an owner. */
  private collectOwned(owner: string): GenerationalMap<T> {
    const records = new GenerationalMap<T>()
    for (const id of this.idsBy(this.ownerIndex!, owner)) records.load(id, this.rows.get(id)!)
    this.owned.set(owner, records)
    return records
  }

  /** Inserts or replaces. Returns the previous version (undefined for an insert). */
  put(record: T): T | undefined {
    const id = this.keyOf(record)
    const previous = this.rows.get(id)
    this.observer?.(id, previous)
    if (previous === undefined) {
      this.rows.add(id, record)
      this.addToIndexes(id, record)
      this.ownedBy(record)?.add(id, record)
    } else {
      this.rows.replace(id, record)
      this.ownedBy(record)?.replace(id, record)
    }
    return previous
  }

  /** A record as stored on disk (snapshot or log): decoded to the current shape, then put. */
  putStored(stored: Record<string, unknown>): void {
    this.put(this.decodeStored ? this.decodeStored(stored) : (stored as T))
  }

  /**
   * Start-up's bulk insert of a snapshot's records, each id once: no lookup of a previous version,
   * straight into the maps' old generation (loading is not the steady write stream that the young
   * generation exists for).
   */
  loadStored(stored: Record<string, unknown>): void {
    const record = this.decodeStored ? this.decodeStored(stored) : (stored as T)
    const id = this.keyOf(record)
    this.rows.load(id, record)
    this.addToIndexes(id, record)
  }

  /** The records of `record`'s owner by id, if a `getOwned` has asked for them (kept up to date from then on). */
  private ownedBy(record: T): GenerationalMap<T> | undefined {
    if (this.owned.size === 0) return undefined
    const owner = (record as Record<string, unknown>)[this.ownerField!]
    return typeof owner === 'string' ? this.owned.get(owner) : undefined
  }

  private addToIndexes(id: string, record: T): void {
    this.order.push(id)
    for (const [name, keysOf] of this.indexDefs) {
      const keys = keysOf(record)
      if (keys === null || keys === undefined) continue
      const index = this.indexes.get(name)!
      if (typeof keys === 'string') appendTo(index, keys, id)
      else for (const key of keys) appendTo(index, key, id)
    }
  }

  /** Removes a record; only used to undo an insert whose log write failed, so it is near the tail. */
  remove(id: string): void {
    const previous = this.rows.get(id)
    if (previous === undefined) return
    this.observer?.(id, previous)
    this.rows.delete(id)
    this.ownedBy(previous)?.delete(id)
    this.listEdits++
    removeFromTail(this.order, id)
    for (const [name, keysOf] of this.indexDefs) {
      const index = this.indexes.get(name)!
      for (const key of keyList(keysOf(previous))) {
        const entry = index.get(key)
        if (entry === id) index.delete(key)
        else if (Array.isArray(entry)) {
          removeFromTail(entry, id)
          if (entry.length === 1) index.replace(key, entry[0]!)
        }
      }
    }
  }

  /**
   * Removes the oldest `count` records (the first in creation order) and returns them, oldest first.
   * Retention's delete (audit events): the records leave the head of every list, so it costs the
   * records removed and one move of each list, never a search.
   */
  removeOldest(count: number): T[] {
    return this.removeIds(this.order.slice(0, count))
  }

  /**
   * Removes these records, given oldest first; the replay of a logged `removeOldest`. They are
   * expected at the head of the table (the same order the live process had), and are found
   * anywhere otherwise, only slower.
   */
  removeIds(ids: readonly string[]): T[] {
    const removed: T[] = []
    for (const id of ids) {
      const record = this.rows.get(id)
      if (record === undefined) continue
      this.observer?.(id, record)
      this.rows.delete(id)
      this.ownedBy(record)?.delete(id)
      removed.push(record)
    }
    this.listEdits++
    removeFromList(this.order, ids)
    for (const [name, keysOf] of this.indexDefs) {
      const index = this.indexes.get(name)!
      for (const [key, keyIds] of idsByKey(removed, keysOf, this.keyOf)) {
        const entry = index.get(key)
        if (entry === undefined) continue
        if (typeof entry === 'string') {
          if (keyIds.includes(entry)) index.delete(key)
          continue
        }
        removeFromList(entry, keyIds)
        if (entry.length === 0) index.delete(key)
        else if (entry.length === 1) index.replace(key, entry[0]!)
      }
    }
    return removed
  }

  /** Undoes `removeOldest` (its log write failed): the records go back at the head, in order. */
  restoreOldest(records: readonly T[]): void {
    const ids = records.map((record) => this.keyOf(record))
    for (const [i, record] of records.entries()) {
      this.observer?.(ids[i]!, undefined)
      this.rows.add(ids[i]!, record)
      this.ownedBy(record)?.add(ids[i]!, record)
    }
    this.listEdits++
    this.order.unshift(...ids)
    for (const [name, keysOf] of this.indexDefs) {
      const index = this.indexes.get(name)!
      for (const [key, keyIds] of idsByKey(records, keysOf, this.keyOf)) {
        const entry = index.get(key)
        if (entry === undefined) index.add(key, keyIds.length === 1 ? keyIds[0]! : keyIds)
        else index.replace(key, [...keyIds, ...(typeof entry === 'string' ? [entry] : entry)])
      }
    }
  }

  /** Every id in creation order. The array is live: do not modify it; copy it to keep a view. */
  ids(): readonly string[] {
    return this.order
  }

  /** Ids listed under `key` in index `index`, in creation order (may be live: do not modify it). */
  idsBy(index: string, key: string): readonly string[] {
    const byKey = this.indexes.get(index)
    if (!byKey) throw new Error(`table ${this.name} has no index ${index}`)
    const entry = byKey.get(key)
    return entry === undefined ? EMPTY : typeof entry === 'string' ? [entry] : entry
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

function appendTo(index: GenerationalMap<IndexEntry>, key: string, id: string): void {
  const entry = index.get(key)
  if (entry === undefined) index.add(key, id)
  else if (typeof entry === 'string') index.replace(key, [entry, id])
  else entry.push(id)
}

/** The records' ids under each index key they are listed under, in the records' order. */
function idsByKey<T>(records: readonly T[], keysOf: IndexKeys<T>, keyOf: (record: T) => string): Map<string, string[]> {
  const byKey = new Map<string, string[]>()
  for (const record of records) {
    for (const key of keyList(keysOf(record))) {
      const ids = byKey.get(key)
      if (ids) ids.push(keyOf(record))
      else byKey.set(key, [keyOf(record)])
    }
  }
  return byKey
}

/** Removes `gone` (in list order) from `ids`: one splice when they are its head, as retention's are. */
function removeFromList(ids: string[], gone: readonly string[]): void {
  if (gone.length === 0) return
  if (gone.every((id, i) => ids[i] === id)) {
    ids.splice(0, gone.length)
    return
  }
  const drop = new Set(gone)
  let kept = 0
  for (const id of ids) if (!drop.has(id)) ids[kept++] = id
  ids.length = kept
}

function removeFromTail(ids: string[], id: string): void {
  const at = ids.lastIndexOf(id)
  if (at !== -1) ids.splice(at, 1)
}

/**
 * A string-keyed map kept as two: a small young map that takes every new key, merged into the big
 * old one only every MERGE_AFTER new keys.
 *
 * Why: Bun's JavaScriptCore collector is generational without card marking. An old object written
 * since the last young ("eden") collection is rescanned whole by the next one, and a Map is one
 * object: with a million rows, one insert into a one-Map table made every eden collection walk a
 * million entries, for the rows and again for each index with a key per row. Under a stream of
 * inserts that GC work grew with the table: at 1M enrollments a POST cost several times its CPU at
 * 10k. Now the big map is written, so rescanned, once per merge instead of once per collection.
 */
const MERGE_AFTER = 1 << 15

export class GenerationalMap<V> {
  private old = new Map<string, V>()
  /** New keys, and replacements of old ones (which shadow the old value until the merge). */
  private young = new Map<string, V>()
  private count = 0

  get size(): number {
    return this.count
  }

  get(key: string): V | undefined {
    const value = this.young.get(key)
    return value !== undefined ? value : this.old.get(key)
  }

  has(key: string): boolean {
    return this.young.has(key) || this.old.has(key)
  }

  /** A key not in the map yet. */
  add(key: string, value: V): void {
    this.count++
    this.young.set(key, value)
    if (this.young.size >= MERGE_AFTER) this.merge()
  }

  /** Loading only: a key not in the map yet, straight into the old generation. */
  load(key: string, value: V): void {
    this.count++
    this.old.set(key, value)
  }

  /** A key already in the map: the new value goes to the young map too, so the old one stays clean. */
  replace(key: string, value: V): void {
    this.young.set(key, value)
    if (this.young.size >= MERGE_AFTER) this.merge()
  }

  /** Every value (a young one shadows the old one under its key). */
  *values(): IterableIterator<V> {
    yield* this.young.values()
    for (const [key, value] of this.old) if (!this.young.has(key)) yield value
  }

  delete(key: string): void {
    const inYoung = this.young.delete(key)
    const inOld = this.old.delete(key)
    if (inYoung || inOld) this.count--
  }

  private merge(): void {
    if (this.old.size < this.young.size) {
      // Still small (loading): copy the smaller one; young values win.
      for (const [key, value] of this.old) if (!this.young.has(key)) this.young.set(key, value)
      this.old = this.young
    } else {
      for (const [key, value] of this.young) this.old.set(key, value)
    }
    this.young = new Map()
  }
}
