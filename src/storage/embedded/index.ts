/**
 * The embedded implementation of the storage interface (docs/storage.md): the in-memory tables and
 * write-ahead log of src/store, answered synchronously.
 *
 * Transactions run one at a time. A body's writes are kept aside (its own finds see them) and
 * applied together when it returns, in one log record: a body that throws leaves nothing behind,
 * and no reader ever sees half of a change. The log record is then group-committed with others;
 * the next transaction does not wait for that fsync.
 */
import type { Store, Transaction } from '../../store/store'
import type { Table } from '../../store/table'
import { currentMicros, nowMicros } from '../../store/clock'
import { StorageUnavailableError } from '../../store/wal'
import { sameEnrollmentTuple, PRIMARY_KEY, TABLE_NAMES, type AuditEvent, type Enrollment, type RecordOf, type TableName } from '../records'
import { then, UniqueViolation, type Changes, type Credential, type Condition, type FieldIn, type Fresh, type ListQuery, type Maybe, type Page, type ParentLink, type Readiness, type StateMark, type Storage, type Tx, type WithParent } from '../storage'
import { exists, listPage } from './planner'

export class EmbeddedStorage implements Storage {
  readonly synchronous = true
  /** Settles once the transaction running now (if any) has applied its writes. */
  private running: Promise<unknown> = Promise.resolve()

  constructor(readonly store: Store) {}

  find<N extends TableName>(table: N, id: string, within?: readonly FieldIn<N>[]): RecordOf<N> | undefined {
    const rows = this.store.tables[table] as unknown as Table<RecordOf<N>>
    if (within === undefined) return rows.get(id)
    // A scope on the table's owner field (every scope src/modules/shared/scope.ts makes): looked up
    // among the owners' own records, so another tenant's id is the same miss as an unknown one.
    if (within.length === 1 && within[0]!.field === rows.ownerField) {
      for (const owner of within[0]!.in) {
        const record = rows.getOwned(owner, id)
        if (record !== undefined) return record
      }
      return undefined
    }
    const record = rows.get(id)
    return record !== undefined && meets(record, within) ? record : undefined
  }

  findCredential(tokenId: string): Credential | undefined {
    const { tokens, organizations } = this.store.tables
    const token = tokens.get(tokenId)
    if (token === undefined) return undefined
    const organization = organizations.get(token.organization_id)
    const parent = organization?.parent_id ? organizations.get(organization.parent_id) : undefined
    return { token, organization, parent }
  }

  findWithParent<N extends TableName, P extends TableName>(table: N, id: string, parent: ParentLink<N, P>, within?: readonly FieldIn<N>[]): WithParent<N, P> | undefined {
    const record = this.find(table, id, within)
    if (record === undefined) return undefined
    const parentId = record[parent.field] as string | null
    return { record, parent: parentId ? (this.store.tables[parent.table].get(parentId) as RecordOf<P> | undefined) : undefined }
  }

  findMany<N extends TableName>(table: N, ids: readonly string[], within?: readonly FieldIn<N>[]): (RecordOf<N> | undefined)[] {
    return ids.map((id) => this.find(table, id, within))
  }

  list<N extends TableName>(query: ListQuery<N>): Maybe<Page<RecordOf<N>>> {
    return listPage(this.store.tables, query)
  }

  exists<N extends TableName>(table: N, where: readonly Condition<N>[]): boolean {
    return exists(this.store.tables, table, where)
  }

  mark(): StateMark {
    return this.store.undoMark
  }

  now(): number {
    return currentMicros()
  }

  transaction<R>(body: (tx: Tx) => Promise<R>, since?: StateMark): Promise<R> {
    const result = this.running.then(async () => {
      // Before the body, so that a refusal it would make rests on no undone write either.
      let undone = this.undoneSince(since)
      if (undone) throw undone
      const tx = new EmbeddedTx(this)
      const value = await body(tx)
      // And in the same turn as the commit below: no undo can come in between.
      undone = this.undoneSince(since)
      if (undone) throw undone
      // Applied in this same turn, so the next transaction (queued behind `running`) sees it.
      return { value, durable: this.store.commit((engine) => tx.apply(engine), tx.readers()) }
    })
    this.running = result.catch(() => {})
    return result.then(async ({ value, durable }) => (await durable, value))
  }

  purgeAuditEvents(before: number, limit: number): Promise<number> {
    const result = this.running.then(() => {
      const events = this.store.tables.audit_events
      // Creation order is time order: the events to drop are the head of the table.
      let count = 0
      while (count < limit && events.first + count < events.last && events.createdOf(events.first + count) < before) count++
      return { count, durable: count > 0 ? this.store.commit((engine) => engine.dropOldest('audit_events', count)) : undefined }
    })
    this.running = result.catch(() => {})
    return result.then(async ({ count, durable }) => (await durable, count))
  }

  settle<T>(value: T, since?: StateMark, customerId?: string | null): Maybe<T> {
    const undone = this.undoneSince(since)
    if (undone) return Promise.reject(undone)
    const barrier = this.store.readBarrier(customerId)
    return barrier ? barrier.then(() => value) : value
  }

  /** The 503 of a request that began to read at `since`, if a write was undone since (`StateMark`). */
  private undoneSince(since: StateMark | undefined): StorageUnavailableError | undefined {
    if (since === undefined || since === this.store.undoMark) return undefined
    return new StorageUnavailableError(new Error('a change this request may have read was undone: its write to the log failed'))
  }

  /** After a failed write, ready again once a write succeeds or a probe of the log does (`Store.probeWritable`). */
  readiness(): Maybe<Readiness> {
    const writable = this.store.probeWritable()
    const answer = (ok: boolean): Readiness => (ok ? 'ready' : 'storage_unavailable')
    return writable instanceof Promise ? writable.then(answer) : answer(writable)
  }

  recordCounts(): Record<TableName, number> {
    return Object.fromEntries(TABLE_NAMES.map((name) => [name, this.store.tables[name].size])) as Record<TableName, number>
  }

  observeWrites(observer: (seconds: number) => void): void {
    this.store.writeObserver = observer
  }

  close(): Promise<void> {
    return this.store.close()
  }
}

/** Whether `record` meets every condition of `within` (`Reader.find`). */
const meets = <N extends TableName>(record: RecordOf<N>, within: readonly FieldIn<N>[]) =>
  within.every((condition) => condition.in.includes(record[condition.field] as string))

class EmbeddedTx implements Tx {
  /** `table` → id → the record as this transaction leaves it, in write order. */
  private readonly writes = new Map<TableName, Map<string, unknown>>()
  /** The time of this change, one for all its records (the clock strictly increases across changes). */
  private stamp: number | undefined

  constructor(private readonly storage: EmbeddedStorage) {}

  find<N extends TableName>(table: N, id: string): RecordOf<N> | undefined {
    return (this.writes.get(table)?.get(id) as RecordOf<N> | undefined) ?? this.storage.find(table, id)
  }

  exists<N extends TableName>(table: N, where: readonly Condition<N>[]): boolean {
    return this.storage.exists(table, where)
  }

  findCredential(tokenId: string): Credential | undefined {
    return this.storage.findCredential(tokenId)
  }

  count<N extends TableName>(table: N, where: readonly Condition<N>[], atMost: number): Maybe<number> {
    return then(this.storage.list({ table, where, page: { number: 1, size: 1 }, order: 'asc' }), (page) => Math.min(page.total, atMost))
  }

  async insert<N extends TableName>(table: N, record: Fresh<N>): Promise<RecordOf<N>> {
    return this.insertNow(table, record)
  }

  /** Synchronous: the event is among this transaction's writes when it returns (a throw fails the body). */
  appendEvent(event: Fresh<'audit_events'>, time: number): void {
    this.insertNow('audit_events', event, time)
  }

  private insertNow<N extends TableName>(table: N, record: Fresh<N>, time = this.time()): RecordOf<N> {
    const id = (record as Record<string, string>)[PRIMARY_KEY[table]]!
    if (this.find(table, id)) throw new UniqueViolation(table, 'primary_key')
    if (table === 'enrollments' && this.tupleTaken(record as unknown as Enrollment)) throw new UniqueViolation(table, 'enrollment_tuple')
    return this.write(table, id, { ...record, created: time, modified: time } as RecordOf<N>)
  }

  async insertIfAbsent<N extends TableName>(table: N, record: Fresh<N>): Promise<{ record: RecordOf<N>; inserted: boolean }> {
    const existing = this.find(table, (record as Record<string, string>)[PRIMARY_KEY[table]]!)
    if (existing) return { record: existing, inserted: false }
    return { record: await this.insert(table, record), inserted: true }
  }

  async update<N extends TableName>(table: N, id: string, changes: Changes<N>): Promise<RecordOf<N>> {
    const current = this.find(table, id)
    if (!current) throw new Error(`${table} ${id} does not exist`)
    // The clock strictly increases across the process, so `modified` does for every record.
    return this.write(table, id, { ...current, ...changes, modified: this.time() })
  }

  time(): number {
    return (this.stamp ??= nowMicros())
  }

  /**
   * Who may read this change, for the reads that wait for it to be durable (`Storage.settle`): the
   * customers its audit events name (every change records one; an event of the vendor's own
   * records names none, and only the vendor, who waits for every write, may read those). A change
   * without events, none of the API's, may be seen by anyone.
   */
  readers(): string[] | undefined {
    const events = this.writes.get('audit_events') as Map<string, AuditEvent> | undefined
    if (events === undefined) return undefined
    const customers = new Set<string>()
    for (const event of events.values()) if (event.customer_id !== null) customers.add(event.customer_id)
    return [...customers]
  }

  /** The writes, once, into the engine's transaction (one log record). */
  apply(engine: Transaction): void {
    for (const [table, records] of this.writes) for (const record of records.values()) engine.put(table, record as RecordOf<typeof table>)
  }

  private write<N extends TableName>(table: N, id: string, record: RecordOf<N>): RecordOf<N> {
    let records = this.writes.get(table)
    if (!records) this.writes.set(table, (records = new Map()))
    records.set(id, record)
    return record
  }

  /** Another enrollment has this one's (consumer, installation, application, environment): its installation's few enrollments tell. */
  private tupleTaken(enrollment: Enrollment): boolean {
    const enrollments = this.storage.store.tables.enrollments
    return enrollments.idsBy('installation', enrollment.installation_id).some((id) => sameEnrollmentTuple(enrollments.get(id)!, enrollment))
  }
}
