/**
 * The repository: tables in memory, every change logged and fsynced before it is acknowledged,
 * compacted into a lowdb snapshot.
 *
 * A transaction runs synchronously against the tables and applies its changes at once, so the next
 * request sees them; its log record is then group-committed. If the log cannot be written, every
 * transaction not yet durable is undone in reverse order (later ones may depend on earlier ones) and
 * answered 503. Readers that looked at state not yet durable wait for it (see `readBarrier`), so no
 * response ever shows a write that could still be lost.
 */
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { Low } from 'lowdb'
import { createTables, type Tables } from './tables'
import { TABLE_NAMES, type AuditEvent, type RecordOf, type TableName } from '../storage/records'
import type { Table } from './table'
import { advanceClockPast } from './clock'
import { recordedTime } from './lock'
import { LogWriter, removeSegmentsBefore, removeUnfinishedSegments } from './wal'
import { logRecordText } from './log-record'
import { recover } from './recovery'
import { SnapshotFile, type SnapshotData } from './snapshot-file'
import { isErrnoCode } from './fs-util'
import { SNAPSHOT_FILE } from './paths'
import { hasPaddedLog, readDataFormat, upgradeDataDir } from './format'
import { prepareDataDir } from './data-dir'

const DEFAULT_COMPACT_AFTER_BYTES = 64 * 1024 * 1024

/**
 * A compaction due by the log's size that failed is tried again after this long, doubled at each
 * failure up to the maximum. Without it, a failure before the new log segment exists (a data dir
 * that cannot be written) left the log as long as before, and every write batch started another
 * attempt (and its log line): 1,500 in 2 s under load.
 */
const COMPACTION_RETRY_FIRST_MS = 1_000
const COMPACTION_RETRY_MAX_MS = 60_000

export interface StoreOptions {
  /** Load only: no log writer, no repair of a torn tail (for `issue-token` beside a running server). */
  readonly readOnly?: boolean
  /**
   * Compact once the current log segment grows past this many bytes and past the last snapshot's
   * size: a snapshot rewrites everything, so spacing them by its own size keeps each write's
   * amortised share of compaction constant as the data grows (at most one byte rewritten per byte
   * logged), instead of growing with it.
   */
  readonly compactAfterBytes?: number
  readonly log?: (message: string) => void
  /** The log holds records it must not (a failed batch could not be cut off). Default: exit. */
  readonly onFatal?: (error: unknown) => void
  /** A snapshot was written (for the server's log). */
  readonly onSnapshot?: (snapshot: { readonly lsn: number; readonly bytes: number; readonly seconds: number }) => void
}

/** How to take one write back: a put's previous version (undefined: it was an insert), or dropped records. */
type Undo = [table: TableName, id: string, previous: unknown] | [table: TableName, dropped: readonly unknown[]]

interface PendingTransaction {
  readonly lsn: number
  readonly undo: Undo[]
}

/** A write not yet durable, as readers wait for it. */
interface PendingWrite {
  readonly lsn: number
  readonly durable: Promise<unknown>
}

/** The handle a transaction body writes through. */
export class Transaction {
  readonly undo: Undo[] = []
  readonly puts: [TableName, unknown][] = []
  /** Logged as `drops`: each table's removed ids, oldest first. */
  readonly drops: [TableName, string[]][] = []

  constructor(private readonly tables: Tables) {}

  put<N extends TableName>(table: N, record: RecordOf<N>): RecordOf<N> {
    const previous = (this.tables[table] as { put(r: unknown): unknown }).put(record)
    this.undo.push([table, this.tables[table].keyOf(record as never), previous])
    this.puts.push([table, record])
    return record
  }

  /**
   * Removes the oldest `count` records of `table` (retention; docs/storage.md). Logged by id, so
   * replaying the log removes exactly these; undone by putting them back at the head.
   */
  dropOldest(table: TableName, count: number): number {
    const target = this.tables[table] as unknown as Table<unknown>
    const dropped = target.removeOldest(count)
    if (dropped.length === 0) return 0
    this.undo.push([table, dropped])
    this.drops.push([table, dropped.map((record) => target.keyOf(record))])
    return dropped.length
  }
}

export class Store {
  readonly tables: Tables = createTables()
  private lastLsn = 0
  /** LSN the snapshot on disk covers; a compaction with nothing newer is skipped. */
  private snapshotLsn = 0
  /** Size of the snapshot on disk, the other half of the compaction threshold. */
  private snapshotBytes = 0
  private writer: LogWriter | null = null
  private pending: PendingTransaction[] = []
  private newestPending: Promise<unknown> | undefined
  /**
   * The newest pending write each reader may see (docs/storage.md, "What each implementation promises"), and
   * the newest of those every reader may: what `readBarrier(reader)` waits for.
   */
  private readonly newestPendingFor = new Map<string, PendingWrite>()
  private newestPendingForAll: PendingWrite | undefined
  private compaction: Promise<boolean> | null = null
  /** After failed compactions (COMPACTION_RETRY_FIRST_MS): when the next due by size may start, and the wait after another failure. */
  private compactionRetryAt = 0
  private compactionRetryMs = COMPACTION_RETRY_FIRST_MS
  private closed = false
  private closing: Promise<void> | undefined
  private readonly log: (message: string) => void
  /** The last write to the log failed, and none succeeded since (GET /readyz). */
  private failing = false
  /** The probe of the log under way while failing (`probeWritable`). */
  private probing: Promise<boolean> | undefined
  /** How many times writes not yet durable were undone (a failed append): `StateMark` in src/storage/storage.ts. */
  private undoneCount = 0
  /** Told how long each durable write took (the log's append and fsync). */
  writeObserver: ((seconds: number) => void) | undefined

  private constructor(
    readonly dir: string,
    private readonly options: StoreOptions,
  ) {
    this.log = options.log ?? ((message) => console.error(message))
  }

  static async open(dir: string, options: StoreOptions = {}): Promise<Store> {
    const store = new Store(dir, options)
    if (!options.readOnly) await prepareDataDir(dir)
    const format = await readDataFormat(dir)
    let recovered = await recover(dir, store.tables, { repair: !options.readOnly, warn: store.log, paddedLog: hasPaddedLog(format) })
    if (!options.readOnly) recovered = await upgradeDataDir(dir, format, store.tables, recovered)
    store.lastLsn = recovered.lastLsn
    store.snapshotLsn = recovered.snapshotLsn
    store.snapshotBytes = await fileSize(join(dir, SNAPSHOT_FILE))
    // Never before a time stored, nor before the time the last holder of the dir noted (src/store/lock.ts).
    advanceClockPast(Math.max(recovered.newestTimestamp, recordedTime(dir)))
    if (!options.readOnly) {
      await removeUnfinishedSegments(dir)
      store.writer = await LogWriter.open(dir, recovered.lastLsn, store.writerHooks(), recovered.lastSegment)
    }
    return store
  }

  /** False from a failed write to the log until a write succeeds again. */
  get writable(): boolean {
    return !this.failing
  }

  /**
   * Whether writes can be made durable: after a failed write, a probe of the log (`LogWriter.probe`)
   * whose success counts as a write that succeeded. Without it a server whose disk had recovered
   * stayed unready until a client's write came, which a load balancer that took it out never sent
   * (review, 2026-11-30). One probe at a time; callers meanwhile share its answer.
   */
  probeWritable(): boolean | Promise<boolean> {
    if (!this.failing || this.closed || !this.writer) return !this.failing
    this.probing ??= this.writer.probe().then((ok) => {
      this.probing = undefined
      if (ok) this.failing = false
      return !this.failing
    })
    return this.probing
  }

  /** True once the vendor organization exists, i.e. `init` has run on this dir. */
  get initialised(): boolean {
    return this.tables.organizations.size > 0
  }

  /**
   * Runs `body` as one atomic, durable change. It must be synchronous: the tables may not change
   * under it. A throw undoes whatever it already put and rejects with it. Resolves with its result
   * once it is on disk. `readers`: the keys of the readers who may see the change (`readBarrier`);
   * absent, every reader.
   */
  commit<R>(body: (tx: Transaction) => R, readers?: readonly string[]): Promise<R> {
    if (this.closed || !this.writer) return Promise.reject(new Error('store is read-only or closed'))
    const tx = new Transaction(this.tables)
    let result: R
    try {
      result = body(tx)
    } catch (error) {
      this.undo(tx.undo)
      return Promise.reject(error) // like every other failure here, so `.catch()` sees it too
    }
    if (tx.puts.length === 0 && tx.drops.length === 0) {
      // Nothing changed, but the answer may rest on state that is not durable yet.
      const barrier = this.readBarrier()
      return barrier ? barrier.then(() => result) : Promise.resolve(result)
    }
    const lsn = ++this.lastLsn
    this.pending.push({ lsn, undo: tx.undo })
    const durable = this.writer.append(lsn, logRecordText(lsn, tx.puts, tx.drops)).then(() => result)
    this.newestPending = durable
    const write = { lsn, durable }
    if (readers === undefined) this.newestPendingForAll = write
    else for (const reader of readers) this.newestPendingFor.set(reader, write)
    return durable
  }

  /**
   * Undefined when everything `reader` may see is durable (the common case, no cost); otherwise a
   * promise that settles when it is, and rejects if it was undone. `reader` is a key a commit named
   * among its `readers` (a customer's id); without one, everything in memory now. Writes are made
   * durable in LSN order, so waiting for the newest is waiting for all.
   */
  readBarrier(reader?: string | null): Promise<unknown> | undefined {
    if (reader === undefined || reader === null) return this.newestPending
    const own = this.newestPendingFor.get(reader)
    const all = this.newestPendingForAll
    if (own === undefined || all === undefined) return (own ?? all)?.durable
    return own.lsn > all.lsn ? own.durable : all.durable
  }

  /** Changes each time writes are undone: what a reader saw before may have been one of them. */
  get undoMark(): number {
    return this.undoneCount
  }

  /**
   * Writes a snapshot of the durable state and drops the log segments it covers. Resolves false
   * when the snapshot on disk is already current (nothing to write).
   */
  compact(): Promise<boolean> {
    if (!this.writer) return Promise.reject(new Error('store is read-only'))
    this.compaction ??= this.writeSnapshot()
      .then(
        (written) => {
          // Any compaction that succeeds (by size, SIGUSR1, or at close) ends the backoff.
          this.compactionRetryAt = 0
          this.compactionRetryMs = COMPACTION_RETRY_FIRST_MS
          return written
        },
        (error: unknown) => {
          this.compactionRetryAt = performance.now() + this.compactionRetryMs
          this.compactionRetryMs = Math.min(this.compactionRetryMs * 2, COMPACTION_RETRY_MAX_MS)
          throw error
        },
      )
      .finally(() => (this.compaction = null))
    return this.compaction
  }

  /**
   * Refuses new commits, finishes what is queued, writes a snapshot, closes the log. The log is
   * closed even if the snapshot fails (it still holds every write); the failure is reported.
   */
  close(): Promise<void> {
    this.closing ??= this.shutDown()
    return this.closing
  }

  private async shutDown(): Promise<void> {
    this.closed = true
    const writer = this.writer
    if (!writer) return
    try {
      await this.compaction?.catch(() => {})
      await this.compact()
    } finally {
      await writer.close()
    }
  }

  private writerHooks() {
    return {
      onWritten: (seconds: number) => this.writeObserver?.(seconds),
      onDurable: (lsn: number) => {
        this.failing = false
        let done = 0
        while (done < this.pending.length && this.pending[done]!.lsn <= lsn) done++
        this.pending.splice(0, done)
        if (this.pending.length === 0) this.newestPending = undefined
        this.forgetDurable(lsn)
        const threshold = Math.max(this.options.compactAfterBytes ?? DEFAULT_COMPACT_AFTER_BYTES, this.snapshotBytes)
        // Not while closing: close() writes its own snapshot, and one started later would race the log's close.
        if (!this.closed && this.writer && this.writer.segmentBytes >= threshold && !this.compaction && performance.now() >= this.compactionRetryAt) {
          this.compact().catch((error) => {
            const wait = Math.round((this.compactionRetryAt - performance.now()) / 1000)
            this.log(`snapshot failed, will retry in ${wait} s: ${(error as Error).message}`)
          })
        }
      },
      onFailure: (firstLsn: number) => {
        this.failing = true
        const failed = this.pending.filter((p) => p.lsn >= firstLsn)
        this.pending = this.pending.filter((p) => p.lsn < firstLsn)
        for (let i = failed.length - 1; i >= 0; i--) this.undo(failed[i]!.undo)
        this.undoneCount++
        this.lastLsn = firstLsn - 1
        this.newestPending = undefined
        this.forgetDurable(Infinity) // undone: nothing of them to wait for
        this.log(`write-ahead log append failed; ${failed.length} transaction(s) undone and answered 503`)
      },
      onFatal: (error: unknown) => {
        if (this.options.onFatal) return this.options.onFatal(error)
        this.log(`FATAL: could not remove a failed write from the log: ${(error as Error)?.message ?? error}`)
        process.exit(70)
      },
    }
  }

  /** The pending writes up to `lsn` are durable (or undone): no reader waits for them any more. */
  private forgetDurable(lsn: number): void {
    if (this.newestPendingForAll !== undefined && this.newestPendingForAll.lsn <= lsn) this.newestPendingForAll = undefined
    for (const [reader, write] of this.newestPendingFor) if (write.lsn <= lsn) this.newestPendingFor.delete(reader)
  }

  private undo(entries: Undo[]): void {
    for (let i = entries.length - 1; i >= 0; i--) {
      const entry = entries[i]!
      const target = this.tables[entry[0]] as unknown as Table<unknown>
      if (entry.length === 2) target.restoreOldest(entry[1])
      else if (entry[2] === undefined) target.remove(entry[1])
      else target.put(entry[2])
    }
  }

  /**
   * Point-in-time snapshot at the durable LSN, taken while no batch is in flight. Records changed
   * afterwards, and those whose log record is still queued, are written as they were at that point:
   * a snapshot never holds a write that might yet fail.
   */
  private async writeSnapshot(): Promise<boolean> {
    const writer = this.writer!
    const started = performance.now()
    const view = await writer.quiesce(async () => {
      if (writer.durableLsn === this.snapshotLsn) return null
      const view = this.captureView(writer.durableLsn)
      await writer.rotate()
      return view
    })
    if (!view) return false
    try {
      const db = new Low<SnapshotData>(new SnapshotFile(join(this.dir, SNAPSHOT_FILE)), view.data)
      await db.write()
    } finally {
      for (const name of TABLE_NAMES) this.tables[name].observer = undefined
    }
    this.snapshotLsn = view.data.lsn
    this.snapshotBytes = await fileSize(join(this.dir, SNAPSHOT_FILE))
    await removeSegmentsBefore(this.dir, view.data.lsn + 1)
    this.options.onSnapshot?.({ lsn: view.data.lsn, bytes: this.snapshotBytes, seconds: (performance.now() - started) / 1000 })
    return true
  }

  private captureView(lsn: number): { data: SnapshotData } {
    const tables: Record<string, Iterable<unknown>> = {}
    for (const name of TABLE_NAMES) {
      const table = this.tables[name] as unknown as {
        ids(): readonly string[]
        get(id: string): unknown
        keyOf(record: unknown): string
        observer: ((id: string, previous: unknown) => void) | undefined
      }
      const asOfCapture = new Map<string, unknown>()
      /** Records dropped by queued transactions: still there as of the capture, and the oldest of all. */
      const dropped: unknown[] = []
      // Queued transactions are not durable yet: keep their pre-images. Newest first, within a
      // transaction too (it may change a record twice), so the earliest pre-image is set last and wins.
      for (let p = this.pending.length - 1; p >= 0; p--) {
        const undo = this.pending[p]!.undo
        for (let u = undo.length - 1; u >= 0; u--) {
          const entry = undo[u]!
          if (entry[0] !== name) continue
          if (entry.length === 2) dropped.unshift(...entry[1])
          else asOfCapture.set(entry[1], entry[2] ?? null)
        }
      }
      // Unless its insert is queued too: then it did not exist as of the capture either.
      const older = dropped.filter((record) => asOfCapture.get(table.keyOf(record)) !== null)
      if (name === 'audit_events') {
        tables[name] = this.auditEventsAsOf(asOfCapture, older as AuditEvent[])
        continue
      }
      table.observer = (id, previous) => {
        if (!asOfCapture.has(id)) asOfCapture.set(id, previous ?? null)
      }
      const ids = table.ids().slice()
      tables[name] = (function* () {
        yield* older
        for (const id of ids) {
          const record = asOfCapture.has(id) ? asOfCapture.get(id) : table.get(id)
          if (record !== null && record !== undefined) yield record
        }
      })()
    }
    return { data: { format: 1, lsn, meta: {}, tables } }
  }

  /**
   * The audit events as of the capture: a view that later writes do not change (audit-table.ts
   * `capture`), in their encoded form (docs/storage.md "Audit events in memory"), without those whose
   * insert is queued, after `older` (dropped by queued transactions). `asOfCapture`: as in captureView.
   */
  private auditEventsAsOf(asOfCapture: ReadonlyMap<string, unknown>, older: readonly AuditEvent[]): Iterable<unknown> {
    const queuedInserts = new Set<string>()
    for (const [id, previous] of asOfCapture) if (previous === null) queuedInserts.add(id)
    const captured = this.tables.audit_events.capture(queuedInserts)
    if (queuedInserts.size === asOfCapture.size) return captured.snapshotLines(older)
    // An event replaced by a queued transaction (keyward never replaces one): kept correct, not fast,
    // as records, each as it was.
    return (function* () {
      yield* older
      for (const record of captured.records()) yield asOfCapture.has(record.event_id) ? asOfCapture.get(record.event_id) : record
    })()
  }
}

async function fileSize(path: string): Promise<number> {
  return stat(path).then(
    (info) => info.size,
    (error) => (isErrnoCode(error, 'ENOENT') ? 0 : Promise.reject(error)),
  )
}
