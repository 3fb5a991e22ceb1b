/**
 * The write-ahead log on disk: numbered segment files and a group-commit writer.
 *
 * Appends queue up while a batch is being written; the next batch takes everything queued, so one
 * write and one fdatasync acknowledge many transactions and durable throughput grows with
 * concurrency. A batch that cannot be written is zeroed out of the file again, and it and everything
 * queued behind it (which may depend on it) fail together.
 *
 * A segment file is grown ahead of its records, in steps of SEGMENT_GROWTH_BYTES, so that at least
 * one zero byte always follows the last record: recovery can then tell a crash mid-append (the start
 * of a record, then zeros) from a file cut short after the fact (see log-format.ts).
 */
import { open, readdir, rename, rm, unlink, type FileHandle } from 'node:fs/promises'
import { writeSync } from 'node:fs'
import { join } from 'node:path'
import { encodeRecordInto, LOG_HEADER_BYTES, payloadBytes } from './log-format'
import { fsyncDir } from './fs-util'

const SEGMENT = /^wal-(\d{16})\.log$/

/** Segment files are created this big and grow by this much (sparse: the zeros cost no disk). */
export const SEGMENT_GROWTH_BYTES = 64 * 1024

export const segmentFileName = (firstLsn: number) => `wal-${String(firstLsn).padStart(16, '0')}.log`

export interface Segment {
  readonly path: string
  readonly firstLsn: number
}

/** Segment files of a data dir, oldest first. */
export async function listSegments(dir: string): Promise<Segment[]> {
  const names = await readdir(dir)
  return names
    .map((name) => SEGMENT.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ path: join(dir, m[0]), firstLsn: Number(m[1]) }))
    .sort((a, b) => a.firstLsn - b.firstLsn)
}

/** The log could not be written; the write was undone. Answered as 503. */
export class StorageUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`write-ahead log append failed: ${(cause as Error)?.message ?? cause}`, { cause })
    this.name = 'StorageUnavailableError'
  }
}

/** A batch's records are framed into one buffer, kept for the next batch up to this size. */
const KEPT_BATCH_BYTES = 1 << 20

interface PendingAppend {
  readonly lsn: number
  readonly payload: Uint8Array | string
  /** The payload's length in its record (`payloadBytes`). */
  readonly length: number
  resolve(): void
  reject(error: Error): void
}

export interface LogWriterHooks {
  /** Everything up to `lsn` is on disk. Called before the appends' promises resolve. */
  onDurable(lsn: number): void
  /** Appends from `firstLsn` on were not written and are about to be rejected: undo them. */
  onFailure(firstLsn: number): void
  /** The failed batch could not be cut off the file: the log may hold unacknowledged records. */
  onFatal(error: unknown): void
  /** A batch was written and synced in `seconds` (the metrics' durable write). */
  onWritten?(seconds: number): void
}

export class LogWriter {
  private queue: PendingAppend[] = []
  private quiescers: (() => Promise<void>)[] = []
  private running = false
  private file: FileHandle
  private offset: number
  /** The file's size: always more than `offset`, the zeros after the records. */
  private size: number
  private segment: Segment
  private durable: number
  /** Where batches are framed: a batch is written and synced before the next one is made. */
  private batchBuffer = Buffer.allocUnsafe(64 * 1024)

  private constructor(
    private readonly dir: string,
    file: FileHandle,
    segment: Segment,
    offset: number,
    size: number,
    durableLsn: number,
    private readonly hooks: LogWriterHooks,
  ) {
    this.file = file
    this.segment = segment
    this.offset = offset
    this.size = size
    this.durable = durableLsn
  }

  /** Continues `segment` at `offset` (recovery truncated anything past it), or starts a new one. */
  static async open(dir: string, durableLsn: number, hooks: LogWriterHooks, last?: { segment: Segment; end: number }): Promise<LogWriter> {
    if (last) {
      const file = await open(last.segment.path, 'r+')
      return new LogWriter(dir, file, last.segment, last.end, (await file.stat()).size, durableLsn, hooks)
    }
    const segment = { path: join(dir, segmentFileName(durableLsn + 1)), firstLsn: durableLsn + 1 }
    const file = await createSegmentFile(dir, segment)
    return new LogWriter(dir, file, segment, 0, SEGMENT_GROWTH_BYTES, durableLsn, hooks)
  }

  get durableLsn(): number {
    return this.durable
  }

  /** Bytes in the current segment: the signal for compaction. */
  get segmentBytes(): number {
    return this.offset
  }

  get currentSegment(): Segment {
    return this.segment
  }

  append(lsn: number, payload: Uint8Array | string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ lsn, payload, length: payloadBytes(payload), resolve, reject })
      this.kick()
    })
  }

  /**
   * Runs `task` at a point where no batch is being written: everything not still queued is durable.
   * Appends keep queueing meanwhile and are written after it.
   */
  quiesce<T>(task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.quiescers.push(() => task().then(resolve, reject))
      this.kick()
    })
  }

  /**
   * Whether the log takes writes again, after a failed one (GET /readyz, docs/operations.md): a
   * page of zeros written where the next record goes, and synced. That place holds zeros already
   * (the segment's padding, or a failed batch zeroed again), so the log reads the same after it; a
   * disk still full cannot give the page its blocks, and a failing device fails the write or the sync.
   */
  probe(): Promise<boolean> {
    return this.quiesce(async () => {
      try {
        await this.makeRoomFor(PAGE)
        await writeFully(this.file, new Uint8Array(PAGE), this.offset, { written: 0 })
        await this.file.datasync()
        return true
      } catch {
        return false
      }
    })
  }

  /** Starts a new segment for the appends that follow; only call from a quiesce task. */
  async rotate(): Promise<Segment> {
    if (this.segment.firstLsn === this.durable + 1) return this.segment // nothing written to it yet
    const segment = { path: join(this.dir, segmentFileName(this.durable + 1)), firstLsn: this.durable + 1 }
    const file = await createSegmentFile(this.dir, segment)
    await this.file.close()
    this.file = file
    this.segment = segment
    this.offset = 0
    this.size = SEGMENT_GROWTH_BYTES
    return segment
  }

  /** Waits for everything queued, then closes the file. */
  async close(): Promise<void> {
    await this.quiesce(async () => {})
    await this.file.close()
  }

  private kick(): void {
    if (this.running) return
    this.running = true
    void this.run()
  }

  private async run(): Promise<void> {
    try {
      for (;;) {
        const quiescers = this.quiescers.splice(0)
        for (const task of quiescers) await task()
        if (this.queue.length === 0) {
          if (this.quiescers.length === 0) return
          continue
        }
        await this.writeBatch(this.queue.splice(0))
      }
    } finally {
      // Cleared in the same turn as the last look at the queue: a `.finally()` callback would run a
      // few microtasks later, and an append queued in between would never be written.
      this.running = false
    }
  }

  private async writeBatch(batch: PendingAppend[]): Promise<void> {
    const bytes = this.framed(batch)
    const progress = { written: 0 }
    const started = performance.now()
    try {
      await this.makeRoomFor(bytes.length)
      await writeFully(this.file, bytes, this.offset, progress)
      await this.file.datasync()
    } catch (error) {
      // A write refused outright (EBADF, EROFS, ENOSPC before any byte) left nothing behind; a
      // handle that cannot write may not be able to zero anything either, and that is not fatal.
      if (progress.written > 0) await this.cutOffFailedBatch(progress.written)
      // Later appends were made against the state the failed batch produced: they fail too.
      const failed = batch.concat(this.queue.splice(0))
      this.hooks.onFailure(failed[0]!.lsn)
      const reason = new StorageUnavailableError(error)
      for (const pending of failed) pending.reject(reason)
      return
    }
    this.hooks.onWritten?.((performance.now() - started) / 1000)
    this.offset += bytes.length
    this.durable = batch[batch.length - 1]!.lsn
    this.hooks.onDurable(this.durable)
    for (const pending of batch) pending.resolve()
  }

  /** The batch's records, back to back, in the batch buffer (or, past its kept size, in one of their own). */
  private framed(batch: readonly PendingAppend[]): Uint8Array {
    let total = 0
    for (const pending of batch) total += LOG_HEADER_BYTES + pending.length
    let target = this.batchBuffer
    if (total > target.length) {
      target = Buffer.allocUnsafe(total)
      if (total <= KEPT_BATCH_BYTES) this.batchBuffer = target
    }
    let end = 0
    for (const pending of batch) end = encodeRecordInto(target, end, pending.payload, pending.length)
    return target.subarray(0, total)
  }

  /** Grows the file so that at least one zero byte will follow the batch (the fdatasync after the write makes the size durable). */
  private async makeRoomFor(bytes: number): Promise<void> {
    const needed = this.offset + bytes + 1
    if (needed <= this.size) return
    const size = Math.ceil(needed / SEGMENT_GROWTH_BYTES) * SEGMENT_GROWTH_BYTES
    await this.file.truncate(size)
    this.size = size
  }

  /**
   * Zeros a partly written batch, so a restart cannot resurrect a write answered 503. Zeroed in
   * place, not truncated: the file must keep its padding (log-format.ts). Its requests are answered
   * only after this, so a crash part way, which may leave some of its records, answered none of them.
   */
  private async cutOffFailedBatch(written: number): Promise<void> {
    try {
      await zeroRange(this.file, this.offset, this.offset + written)
    } catch (error) {
      this.hooks.onFatal(error)
    }
  }
}

const PAGE = 4096

/**
 * Overwrites [start, end) with zeros, one page at a time from the end back, then syncs. Back to
 * front so that a crash part way leaves the range's start followed by zeros: still a torn tail to
 * recovery, never damage.
 */
export async function zeroRange(file: FileHandle, start: number, end: number): Promise<void> {
  const zeros = new Uint8Array(PAGE)
  for (let to = end; to > start; ) {
    const from = Math.max(start, Math.floor((to - 1) / PAGE) * PAGE)
    await writeFully(file, zeros.subarray(0, to - from), from, { written: 0 })
    to = from
  }
  await file.datasync()
}

/**
 * Removes the temporary files of segments a crash left (`createSegmentFile` removes only the one of
 * the name it is about to use, so those of other positions stayed for good: a crash review found
 * five after a hundred kills). Called at a start, by the holder of the dir's lock.
 */
export async function removeUnfinishedSegments(dir: string): Promise<void> {
  for (const name of await readdir(dir)) if (/^wal-\d{16}\.log\.tmp$/.test(name)) await rm(join(dir, name), { force: true })
}

/**
 * A new segment file, already padded with zeros. Made under a temporary name and renamed into
 * place, so a segment file never exists without its padding (an empty one would read as cut short).
 */
async function createSegmentFile(dir: string, segment: Segment): Promise<FileHandle> {
  const temporary = `${segment.path}.tmp`
  await rm(temporary, { force: true }) // left over from a crash
  const file = await open(temporary, 'wx', 0o600)
  try {
    await file.truncate(SEGMENT_GROWTH_BYTES)
    await file.sync()
    await rename(temporary, segment.path)
  } catch (error) {
    await file.close()
    await rm(temporary, { force: true })
    throw error
  }
  await fsyncDir(dir)
  return file
}

/**
 * A synchronous write: it only copies a batch (kilobytes) into the page cache, faster than a trip
 * through the thread pool and back (measured: +13% durable POSTs from one client, +5% from 64).
 * The fdatasync that follows is the slow part, and stays asynchronous.
 */
async function writeFully(file: FileHandle, bytes: Uint8Array, position: number, progress: { written: number }): Promise<void> {
  while (progress.written < bytes.length) {
    const bytesWritten = writeSync(file.fd, bytes, progress.written, bytes.length - progress.written, position + progress.written)
    if (bytesWritten <= 0) throw new Error('short write to the write-ahead log')
    progress.written += bytesWritten
  }
}

export async function removeSegmentsBefore(dir: string, firstLsnToKeep: number): Promise<void> {
  const old = (await listSegments(dir)).filter((s) => s.firstLsn < firstLsnToKeep)
  for (const segment of old) await unlink(segment.path)
  if (old.length > 0) await fsyncDir(dir)
}
