/**
 * The one storage interface that services and HTTP handlers go through for every read and every
 * change (docs/storage.md). Two implementations: the embedded store (the default; in memory, with
 * a write-ahead log) and PostgreSQL. Every rule of the API is written once, above this interface.
 *
 * Reads return `Maybe<T>`: the embedded store answers from memory synchronously (no promise, no
 * tick), PostgreSQL with a promise. `then` chains either without turning a synchronous answer
 * into a promise, so an embedded read stays synchronous end to end.
 */
import type { Organization, RecordOf, TableName, Token } from './records'
import type { Slice } from '../ops/turns'

export type Maybe<T> = T | Promise<T>

/** `next(value)`, synchronously when `value` is not a promise. */
export function then<T, R>(value: Maybe<T>, next: (value: T) => Maybe<R>): Maybe<R> {
  return value instanceof Promise ? value.then(next) : next(value)
}

/** The values of several `Maybe`s, synchronously when none is a promise. */
export function all<T extends readonly unknown[]>(values: { readonly [K in keyof T]: Maybe<T[K]> }): Maybe<T> {
  return values.some((value) => value instanceof Promise) ? (Promise.all(values) as Promise<unknown> as Promise<T>) : (values as unknown as T)
}

type Field<N extends TableName> = keyof RecordOf<N> & string

/** The field of a `table` record that names a record of `table` P (`findWithParent`). */
export interface ParentLink<N extends TableName, P extends TableName> {
  readonly field: Field<N>
  readonly table: P
}

/** Which enrollments a consumer or installation must have (one at least) to match. */
export type EnrollmentLink = 'consumer_id' | 'installation_id' | 'application_id' | 'enrollment_id'

/** The field's value is one of `in` (an empty list matches nothing). */
export interface FieldIn<N extends TableName> {
  readonly field: Field<N>
  readonly in: readonly string[]
}

/** One condition of a query; a query's conditions must all hold. */
export type Condition<N extends TableName> =
  | FieldCondition<N>
  /** Consumers and installations: has an enrollment whose `enrolled` field is one of `in`. */
  | { readonly enrolled: EnrollmentLink; readonly in: readonly string[] }
  /**
   * One of the alternatives holds, each a list of conditions on the record's own fields that must
   * all hold: a test on every candidate, never an index (the token list's states, docs/api.md "Tokens").
   */
  | { readonly anyOf: readonly (readonly FieldCondition<N>[])[] }

/** A condition on the record's own fields. */
export type FieldCondition<N extends TableName> =
  | FieldIn<N>
  /** A text field compared with `text`, case-sensitively. */
  | { readonly field: Field<N>; readonly match: 'exact' | 'contains' | 'startswith'; readonly text: string }
  /** An array field holds `has`. */
  | { readonly field: Field<N>; readonly has: string }
  /** A number field (a timestamp) within [from, until], either end optional. */
  | { readonly field: Field<N>; readonly from?: number; readonly until?: number }

export interface ListQuery<N extends TableName> {
  readonly table: N
  /**
   * The caller's customer: only records it owns (`organization_id`). Null or absent: no scope (the
   * vendor; or a table reached through a parent record already found in scope, like keysets).
   *
   * Promise of the caller (services, see modules/shared/scope.ts): every identifier in a condition
   * has already been reduced to this scope, so a condition never names another tenant's record.
   * Implementations rely on it to answer from an index without testing the scope again, and it is
   * what keeps another tenant's data out of both the answer and its cost.
   */
  readonly scope?: string | null
  readonly where: readonly Condition<N>[]
  /** Absent: every match (the short unpaged lists of docs/api.md "Lists and paging"). `number` is 1-based. */
  readonly page?: { readonly number: number; readonly size: number }
  /** By creation (`created`, then the primary key); `desc` reverses. */
  readonly order: 'asc' | 'desc'
  /**
   * The request's share of the event loop: a long walk waits for its turns as its tenant's, and a
   * page decoded in turns (audit events) uses the slice the answer's texts then go on in. Absent:
   * a slice of its own, of no tenant.
   */
  readonly slice?: Slice
}

export interface Page<T> {
  readonly items: readonly T[]
  /** Every match, before paging. */
  readonly total: number
}

/** A record and the record one of its fields names (its parent), read together. */
export interface WithParent<N extends TableName, P extends TableName> {
  readonly record: RecordOf<N>
  /** Undefined when the field names no record of the parent's table. */
  readonly parent: RecordOf<P> | undefined
}

/** What authenticating a bearer token reads (src/http/auth.ts), in one read. */
export interface Credential {
  readonly token: Token
  /** The token's organization, and that organization's parent (a partner's customer). */
  readonly organization: Organization | undefined
  readonly parent: Organization | undefined
}

/**
 * Where a request began to read (`Reader.mark`): the embedded store's count of the writes it has
 * undone (a failed fsync undoes every write not yet durable, answered 503). An answer or a change
 * that rests on what a request read since its mark is refused (503) if a write was undone since
 * (`Storage.settle`, `Storage.transaction`): what it read may have been that write, which never
 * happened. Conservative (it may not have been), and free, since writes are undone only when the
 * disk fails (docs/storage.md, "What each implementation promises"). Always 0 in database mode,
 * where nothing uncommitted is ever read.
 */
export type StateMark = number

export interface Reader {
  /** The mark to take before a request's first read (its token's): see `StateMark`. */
  mark(): StateMark
  /**
   * The time now in microseconds, by the clock that stamps this storage's records (docs/storage.md,
   * "Time"): token expiry and audit retention are judged on it, so that they agree with `created`,
   * `modified` and `expires` whatever the clocks of the machines do. Embedded: the store's clock;
   * PostgreSQL: the database's, as this instance last read it, moved on by the time since.
   */
  now(): number
  /**
   * The record `id` of `table`; undefined when there is none, or when it does not meet `within`.
   * `within` is the caller's scope (src/modules/shared/scope.ts): a record outside it is dropped inside the
   * storage, from the same work as a missing one (in database mode, by the statement: its row never
   * leaves the database), so that no answer and no timing tells another tenant's ids from unknown ones.
   */
  find<N extends TableName>(table: N, id: string, within?: readonly FieldIn<N>[]): Maybe<RecordOf<N> | undefined>
  /**
   * The token `tokenId` with its organization and that organization's parent; undefined when there
   * is no such token. One read because every request makes it: in database mode one round trip
   * instead of three (docs/storage.md). The rules about them stay in src/http/auth.ts.
   */
  findCredential(tokenId: string): Maybe<Credential | undefined>
  /**
   * The record `id` of `table` with the record of `parent.table` that its field `parent.field`
   * names; undefined when there is no record `id`. One read where a handler needs both (an
   * enrollment and its application): in database mode one joined statement instead of two
   * (docs/storage.md). What they must satisfy stays with the caller; `within` as for `find`.
   */
  findWithParent<N extends TableName, P extends TableName>(table: N, id: string, parent: ParentLink<N, P>, within?: readonly FieldIn<N>[]): Maybe<WithParent<N, P> | undefined>
  /** `ids` in order, undefined where there is none; `within` as for `find` (a list filter's ids, src/modules/shared/scope.ts). */
  findMany<N extends TableName>(table: N, ids: readonly string[], within?: readonly FieldIn<N>[]): Maybe<(RecordOf<N> | undefined)[]>
  list<N extends TableName>(query: ListQuery<N>): Maybe<Page<RecordOf<N>>>
  exists<N extends TableName>(table: N, where: readonly Condition<N>[]): Maybe<boolean>
}

/** A new record: the storage sets `created` and `modified`. */
export type Fresh<N extends TableName> = Omit<RecordOf<N>, 'created' | 'modified'>

/** The fields a change may set (not the primary key, not the timestamps). */
export type Changes<N extends TableName> = Partial<Omit<RecordOf<N>, 'created' | 'modified'>>

/**
 * The handle a transaction body reads and writes through. Everything it reads decides the change,
 * and the decision holds at commit: the implementation keeps what was read from changing under it
 * (embedded: one transaction at a time; PostgreSQL: row locks, see docs/storage.md).
 */
export interface Tx {
  /**
   * Sees this transaction's own writes. `update` says the transaction will change the record (it
   * is locked for that at once instead of being upgraded later, which could deadlock). `none`: read
   * as committed, without a lock, for a record of which the change relies only on what never
   * changes (an organization's existence and type); many transactions share-locking one row is
   * costly in PostgreSQL (docs/storage.md, "Transactions").
   */
  find<N extends TableName>(table: N, id: string, lock?: 'share' | 'update' | 'none'): Maybe<RecordOf<N> | undefined>
  /**
   * The token `tokenId` with its organization and that organization's parent, as committed (as
   * `Reader.findCredential`, never remembered): a request's token judged again inside its change
   * (`changeBy`, src/modules/shared/audit.ts). In database mode one statement, sent without waiting,
   * with the body's first.
   */
  findCredential(tokenId: string): Maybe<Credential | undefined>
  /** Never asked about what the transaction itself wrote (embedded: committed records; PostgreSQL: the transaction's view). */
  exists<N extends TableName>(table: N, where: readonly Condition<N>[]): Maybe<boolean>
  /** How many records match, counted no further than `atMost` (a bound's check costs at most that); as `exists`, never asked about the transaction's own writes. */
  count<N extends TableName>(table: N, where: readonly Condition<N>[], atMost: number): Maybe<number>
  /** Throws `UniqueViolation` if the primary key or another unique rule is taken. */
  insert<N extends TableName>(table: N, record: Fresh<N>): Promise<RecordOf<N>>
  /**
   * Inserts an audit event: a record that nothing in the transaction reads back and whose key
   * (a UUIDv7) is never taken. Returns nothing, so that PostgreSQL can send it without waiting for
   * its answer, in one round trip with what follows and the COMMIT; a failure of the insert fails
   * the transaction (it rejects, nothing is committed). `time` becomes its `created` and
   * `modified`: the time of the change it records, its record's `modified` as this transaction
   * leaves it, so that one record's events are in the order of its changes, each at the time the
   * record shows (in database mode an update's `modified` may be later than the transaction's
   * start, when another instance's clock or transaction was ahead: docs/storage.md "Time").
   */
  appendEvent(event: Fresh<'audit_events'>, time: number): void
  /** The record as inserted, or the existing one with the same primary key (unchanged). */
  insertIfAbsent<N extends TableName>(table: N, record: Fresh<N>): Promise<{ record: RecordOf<N>; inserted: boolean }>
  /** Applies `changes`; `modified` becomes later than both now and the record's previous `modified`. */
  update<N extends TableName>(table: N, id: string, changes: Changes<N>): Promise<RecordOf<N>>
  /** The time (microseconds) this transaction gives what it inserts as `created`: for times derived from it (a token's `expires`). */
  time(): Maybe<number>
}

export interface Storage extends Reader {
  /** True when every read answers without a promise (the embedded store). */
  readonly synchronous: boolean
  /**
   * Runs `body` as one atomic, durable change and resolves with its result once committed (a 2xx
   * may then be sent). A throw rolls everything back and rejects with it. The body may be run more
   * than once (PostgreSQL retries a serialization failure): it must do nothing but read and write
   * through `tx`. `since`: the mark of the request making it (`StateMark`): if a write was undone
   * since, the change is refused with `StorageUnavailableError` and nothing is written, since
   * what the request checked before it (its token, its organization's state) may have been that
   * write; a change of the CLI, which reads nothing before, has none.
   */
  transaction<R>(body: (tx: Tx) => Promise<R>, since?: StateMark): Promise<R>
  /**
   * A read's answer, held back until everything it may have seen is durable (embedded: a write is
   * visible in memory a moment before its log record is on disk). Free when nothing is in flight.
   * `since`: the mark of the request (`StateMark`): the answer is refused with
   * `StorageUnavailableError` if a write was undone since, even one no longer waited for (a read
   * that yielded may have seen it before it was undone). `customerId`: the customer whose data alone
   * the read may show (a customer's or a partner's token), so that it waits for that customer's
   * writes only, never another tenant's; null or absent, everything (a vendor's read).
   */
  settle<T>(value: T, since?: StateMark, customerId?: string | null): Maybe<T>
  /**
   * Audit retention (docs/api.md "Audit events"; docs/storage.md): drops up to `limit` of the oldest audit
   * events whose time (`created`) is before `before`, as one durable change, and resolves with how
   * many it dropped (0: none is that old). The only delete there is: nothing else is ever removed,
   * and events are never changed. Called in the background in small batches, never by a request.
   */
  purgeAuditEvents(before: number, limit: number): Promise<number>
  /**
   * Whether changes can be made durable now (GET /readyz, docs/operations.md). Embedded: not from
   * a failed write to the log until one succeeds again. PostgreSQL: a `SELECT 1` on a connection of
   * its own, bounded in time, at most one at a time and its answer kept for a second.
   */
  readiness(): Maybe<Readiness>
  /** Records per table (GET /metrics, the start-up line); PostgreSQL's statistics estimate them. */
  recordCounts(): Maybe<Record<TableName, number>>
  /**
   * Runs `handle`, one request's handler, so that the request's waits for the storage share one
   * deadline (database mode: `--database-timeout`; docs/storage.md, "A database that does not
   * answer"). Absent where a request never waits on anything but the disk (embedded).
   */
  requestScope?<T>(handle: () => T): T
  /**
   * The running request acts for `tenant` (the customer its token reaches, the vendor's own
   * organization for a vendor token), told once its token is known: database mode gives tenants
   * turns at its connections (docs/storage.md, "Turns at the connections"). Absent in the embedded store.
   */
  actFor?(tenant: string): void
  /** `observer` is told the seconds of each durable write: the log's append and fsync, or a commit. */
  observeWrites(observer: (seconds: number) => void): void
  close(): Promise<void>
}

export type Readiness = 'ready' | 'storage_unavailable' | 'database_unavailable'

/** A unique rule of the data was about to be broken; nothing was written. */
export class UniqueViolation extends Error {
  constructor(
    readonly table: TableName,
    /** `primary_key`, or the rule: `enrollment_tuple`. */
    readonly rule: 'primary_key' | 'enrollment_tuple',
  ) {
    super(`${table}: ${rule} already taken`)
    this.name = 'UniqueViolation'
  }
}
