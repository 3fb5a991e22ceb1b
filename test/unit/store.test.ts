/**
 * The store's promises (docs/storage.md) against real files in temp dirs: acknowledged means
 * on disk, a failed write leaves no trace anywhere, damage is refused with file and offset, a torn
 * tail is dropped with a warning, snapshots hold exactly the durable state.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { appendFileSync, chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { open, type FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { Store, type StoreOptions } from '../../src/store/store.ts'
import type { AuditEvent, Consumer } from '../../src/storage/records.ts'
import { listSegments, StorageUnavailableError, type Segment } from '../../src/store/wal.ts'
import { encodeRecord, LOG_HEADER_BYTES, scanLog } from '../../src/store/log-format.ts'
import { readSnapshot, writeSnapshot, type LoadedSnapshot } from '../../src/store/snapshot-file.ts'
import { AuditEventTable } from '../../src/store/audit-table.ts'
import { isDamageError, recover } from '../../src/store/recovery.ts'
import { createTables } from '../../src/store/tables.ts'
import { initialiseStorage } from '../../src/cli/init.ts'
import { EmbeddedStorage } from '../../src/storage/embedded'
import { changesOf } from '../../src/storage/audit-changes'

const SNAPSHOT = 'snapshot.json'
// Everything here takes milliseconds; a lost wake-up in the writer shows up as a hang, so fail fast.
setDefaultTimeout(5000)

/** The writer's internals a test reaches into to make the OS refuse a write. */
interface WriterInternals {
  file: FileHandle
  close(): Promise<void>
  rotate(): Promise<Segment>
  readonly currentSegment: Segment
}
const writerOf = (store: Store) => (store as unknown as { writer: WriterInternals }).writer

const stores: Store[] = []
const restores: (() => Promise<void>)[] = []

afterEach(async () => {
  // A failed test must not leave a swapped handle behind: one dropped unclosed fails a later test.
  for (const restore of restores.splice(0)) await restore()
  for (const store of stores.splice(0)) await store.close().catch(() => {})
})

const newDir = () => tempDir('keyward-store-')

interface Opened {
  store: Store
  logged: string[]
  fatal: unknown[]
}

async function openStore(dir: string, options: StoreOptions = {}): Promise<Opened> {
  const logged: string[] = []
  const fatal: unknown[] = []
  const store = await Store.open(dir, { log: (m) => logged.push(m), onFatal: (e) => fatal.push(e), ...options })
  stores.push(store)
  return { store, logged, fatal }
}

/**
 * Gives the writer a handle on `path` opened read-only, so the OS refuses its writes (EBADF).
 * The returned function (run by afterEach if the test does not) closes it and puts the good one back.
 */
async function refuseWrites(writer: WriterInternals, path: string): Promise<() => Promise<void>> {
  const good = writer.file
  const refusing = await open(path, 'r')
  writer.file = refusing
  let restored = false
  const restore = async () => {
    if (restored) return
    restored = true
    await refusing.close()
    if (writer.file === refusing) writer.file = good
  }
  restores.push(restore)
  return restore
}

function consumer(id: string, n: number): Consumer {
  return { consumer_id: id, organization_id: 'org', state: 'active', created: n, modified: n }
}

const put = (store: Store, record: Consumer) => store.commit((tx) => tx.put('consumers', record))

/** Consumers by id, as `modified` numbers: compact to compare. */
function consumersOf(store: Store): Record<string, number> {
  return Object.fromEntries([...store.tables.consumers.values()].map((c) => [c.consumer_id, c.modified]))
}

/** What a fresh process would see: a read-only open of the dir, beside whatever else has it open. */
async function durableConsumers(dir: string): Promise<Record<string, number>> {
  const { store } = await openStore(dir, { readOnly: true })
  return consumersOf(store)
}

const segmentPaths = async (dir: string) => (await listSegments(dir)).map((s) => s.path)
/** Bytes of log records in the newest segment (segments are zero-padded ahead of their records). */
const logSize = (dir: string) => {
  const newest = readdirSync(dir).filter((f) => /^wal-\d+\.log$/.test(f)).sort().at(-1)!
  const offsets = recordOffsets(join(dir, newest))
  if (offsets.length === 0) return 0
  const bytes = readFileSync(join(dir, newest))
  const last = offsets.at(-1)!
  return last + LOG_HEADER_BYTES + bytes.readUInt32LE(last)
}

/** Start offsets of the records in a log file. */
function recordOffsets(path: string): number[] {
  const { payloads } = scanLog(readFileSync(path), path)
  const offsets: number[] = []
  let at = 0
  for (const payload of payloads) {
    offsets.push(at)
    at += LOG_HEADER_BYTES + payload.length
  }
  return offsets
}

/** Writes `bytes` in place right after the last record, where an interrupted append would have. */
function writeAfterRecords(path: string, bytes: Uint8Array): number {
  const file = readFileSync(path)
  const end = scanLog(file, path).validEnd
  file.set(bytes, end)
  writeFileSync(path, file)
  return end
}

function flipByte(path: string, at: number): void {
  const bytes = readFileSync(path)
  bytes[at] = bytes[at]! ^ 0x20
  writeFileSync(path, bytes)
}

async function openError(dir: string, options: StoreOptions = {}): Promise<Error & { file: string; offset: number }> {
  let caught: unknown
  try {
    await openStore(dir, options)
  } catch (error) {
    caught = error
  }
  expect(isDamageError(caught)).toBe(true)
  return caught as Error & { file: string; offset: number }
}

describe('durability and replay', () => {
  test('committed records come back on reopen, replayed from the log', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    await store.commit((tx) => {
      tx.put('consumers', consumer('b', 2))
      tx.put('consumers', consumer('a', 3)) // an update in the same transaction
    })
    await put(store, consumer('c', 4))
    expect(await durableConsumers(dir)).toEqual({ a: 3, b: 2, c: 4 })
    expect(readdirSync(dir)).not.toContain(SNAPSHOT) // the log alone carried them
  })

  test("a start after a crash learns the newest time stored from the log's records too (its clock goes on past it)", async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    await store.compact()
    await put(store, consumer('b', 7_000)) // after the snapshot: in the log only
    await put(store, consumer('c', 5_000))
    await writerOf(store).close() // a crash: no snapshot at close
    const recovered = await recover(dir, createTables(), { repair: false, warn: () => {}, paddedLog: true })
    expect(recovered.newestTimestamp).toBe(7_000)
  })

  test('a start removes the temporary segment files crashes left, whatever their positions; the data is whole', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    await writerOf(store).close() // a crash
    const left = ['wal-0000000000000005.log.tmp', 'wal-0000000000000042.log.tmp']
    for (const name of left) writeFileSync(join(dir, name), new Uint8Array(64))
    const { store: again } = await openStore(dir)
    expect(readdirSync(dir).filter((name) => name.endsWith('.tmp'))).toEqual([])
    expect(await durableConsumers(dir)).toEqual({ a: 1 })
    await again.close()
  })

  test('sequential commits each complete (a commit right after an acknowledgement is written)', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    for (let i = 0; i < 50; i++) await put(store, consumer(`c${i}`, i + 1))
    expect(Object.keys(await durableConsumers(dir))).toHaveLength(50)
  }, 5000)

  test('compact, more commits, reopen: snapshot plus log; old segments deleted', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    for (let i = 1; i <= 5; i++) await put(store, consumer(`c${i}`, i))
    const before = await segmentPaths(dir)
    await store.compact()

    const snapshot = (await readSnapshot(join(dir, SNAPSHOT)))!
    expect(snapshot.lsn).toBe(5)
    expect((snapshot.tables.consumers as Consumer[]).map((c) => c.consumer_id)).toEqual(['c1', 'c2', 'c3', 'c4', 'c5'])
    const after = await segmentPaths(dir)
    expect(after).toEqual([join(dir, 'wal-0000000000000006.log')])
    for (const path of before) expect(after).not.toContain(path)

    await put(store, consumer('c6', 6))
    await put(store, consumer('c1', 7))
    expect(await durableConsumers(dir)).toEqual({ c1: 7, c2: 2, c3: 3, c4: 4, c5: 5, c6: 6 })

    // A second compaction with nothing new is skipped; with something new it moves on.
    await store.compact()
    expect((await readSnapshot(join(dir, SNAPSHOT)))!.lsn).toBe(7)
    await store.compact()
    expect(await segmentPaths(dir)).toEqual([join(dir, 'wal-0000000000000008.log')])
  })

  test('close writes a snapshot; commits after close are refused; reopen continues the LSNs', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    await store.close()
    expect((await readSnapshot(join(dir, SNAPSHOT)))!.lsn).toBe(1)
    await expect(put(store, consumer('b', 2))).rejects.toThrow(/closed/)

    const { store: again } = await openStore(dir)
    await put(again, consumer('b', 2))
    await again.close()
    const { store: third } = await openStore(dir)
    expect(consumersOf(third)).toEqual({ a: 1, b: 2 })
  })

  test('close when the snapshot cannot be written: rejects, but the log is closed and holds everything', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    mkdirSync(join(dir, `${SNAPSHOT}.tmp`))
    writeFileSync(join(dir, `${SNAPSHOT}.tmp`, 'x'), '') // the snapshot's temp file cannot be created
    const closing = [store.close(), store.close()]
    await expect(closing[0]!).rejects.toThrow()
    await expect(closing[1]!).rejects.toThrow() // a second caller learns the same, not "closed fine"
    await expect(put(store, consumer('b', 2))).rejects.toThrow(/closed/)
    rmSync(join(dir, `${SNAPSHOT}.tmp`), { recursive: true })
    const { store: again } = await openStore(dir)
    expect(consumersOf(again)).toEqual({ a: 1 })
  })

  test('group commit: 200 concurrent commits share a few fsyncs, and all are durable', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    const file = writerOf(store).file
    let syncs = 0
    let writes = 0
    const datasync = file.datasync.bind(file)
    const write = file.write.bind(file) as (...args: unknown[]) => Promise<unknown>
    file.datasync = () => (syncs++, datasync())
    ;(file as unknown as { write: typeof write }).write = (...args) => (writes++, write(...args))

    await Promise.all(Array.from({ length: 200 }, (_, i) => put(store, consumer(`c${i}`, i + 1))))

    expect(syncs).toBeGreaterThan(0)
    expect(syncs).toBeLessThanOrEqual(10) // one for the first commit, one for everything queued behind it
    expect(writes).toBeLessThanOrEqual(10)
    const [segment] = await segmentPaths(dir)
    expect(recordOffsets(segment!)).toHaveLength(200) // one log record per transaction
    expect(Object.keys(await durableConsumers(dir))).toHaveLength(200)
  })

  test('a commit whose body throws leaves nothing in memory or on disk', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    const [segment] = await segmentPaths(dir)
    const size = statSync(segment!).size

    const failing = store.commit((tx) => {
      tx.put('consumers', consumer('b', 2))
      tx.put('consumers', consumer('a', 3))
      throw new Error('rule broken')
    })
    await expect(failing).rejects.toThrow('rule broken')
    expect(consumersOf(store)).toEqual({ a: 1 })
    expect(store.tables.consumers.ids()).toEqual(['a'])
    expect(store.readBarrier()).toBeUndefined()
    expect(statSync(segment!).size).toBe(size)

    await put(store, consumer('c', 4))
    expect(await durableConsumers(dir)).toEqual({ a: 1, c: 4 })
  })

  test('a commit that changes nothing writes nothing', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    expect(await store.commit(() => 42)).toBe(42)
    expect(recordOffsets((await segmentPaths(dir))[0]!)).toEqual([])
  })
})

describe('torn tail and damage', () => {
  async function storeWithRecords(count: number): Promise<{ dir: string; segment: string }> {
    const dir = newDir()
    const { store } = await openStore(dir)
    for (let i = 1; i <= count; i++) await put(store, consumer(`c${i}`, i))
    await writerOf(store).file.close() // as a crash would: no snapshot
    stores.splice(stores.indexOf(store), 1)
    return { dir, segment: (await segmentPaths(dir))[0]! }
  }

  const tears: [string, () => Uint8Array][] = [
    ['a record cut inside its payload', () => encodeRecord(Buffer.from(JSON.stringify({ lsn: 4, puts: [] }))).subarray(0, LOG_HEADER_BYTES + 5)],
    ['a record cut inside its header', () => encodeRecord(Buffer.from('{"lsn":4,"puts":[]}')).subarray(0, 7)],
    ['a header whose payload was never written', () => encodeRecord(Buffer.from('{"lsn":4,"puts":[]}')).subarray(0, LOG_HEADER_BYTES)],
  ]
  for (const [name, tail] of tears) {
    test(`torn tail (${name}): dropped with a warning, zeroed in place, later commits survive`, async () => {
      const { dir, segment } = await storeWithRecords(3)
      const size = statSync(segment).size
      const end = writeAfterRecords(segment, tail())

      const { store, logged } = await openStore(dir)
      expect(consumersOf(store)).toEqual({ c1: 1, c2: 2, c3: 3 })
      expect(logged).toHaveLength(1)
      expect(logged[0]).toContain(segment)
      expect(logged[0]).toContain(`offset ${end}`)
      expect(statSync(segment).size).toBe(size) // zeroed, not cut: the file keeps its padding
      expect(readFileSync(segment).subarray(end).every((b) => b === 0)).toBe(true)

      await put(store, consumer('c4', 4))
      await store.close()
      const { store: again, logged: quiet } = await openStore(dir)
      expect(consumersOf(again)).toEqual({ c1: 1, c2: 2, c3: 3, c4: 4 })
      expect(quiet).toEqual([])
    })
  }

  test('zeros after the records are the padding, not a tear: nothing dropped, nothing logged', async () => {
    const { dir, segment } = await storeWithRecords(2)
    appendFileSync(segment, new Uint8Array(40)) // a file grown further than the writer grows it
    const { store, logged } = await openStore(dir)
    expect(consumersOf(store)).toEqual({ c1: 1, c2: 2 })
    expect(logged).toEqual([])
  })

  test('a read-only open reads past a torn tail without repairing it', async () => {
    const { dir, segment } = await storeWithRecords(2)
    writeAfterRecords(segment, new Uint8Array([1, 2, 3]))
    const before = readFileSync(segment)
    expect(await durableConsumers(dir)).toEqual({ c1: 1, c2: 2 })
    expect(readFileSync(segment)).toEqual(before)
  })

  test('the newest segment cut short anywhere in its records is refused: acknowledged writes were cut off', async () => {
    const { dir, segment } = await storeWithRecords(3)
    const offsets = recordOffsets(segment)
    const end = scanLog(readFileSync(segment), segment).validEnd
    const original = readFileSync(segment)
    for (const [cut, offset] of [
      [offsets[2]!, offsets[2]!], // right after a record: the records look complete, but the padding is gone
      [offsets[2]! + 5, offsets[2]!], // inside a header
      [offsets[2]! + LOG_HEADER_BYTES + 3, offsets[2]!], // inside a payload
      [end, end], // right after the last record
      [0, 0], // emptied
    ] as const) {
      writeFileSync(segment, original.subarray(0, cut))
      const error = await openError(dir)
      expect([cut, error.file, error.offset]).toEqual([cut, segment, offset])
      expect(error.message).toContain('cut')
      expect(readFileSync(segment).length).toBe(cut) // refused, not "repaired"
    }
  })

  test('a flipped byte in the middle of a log segment is refused, naming the file and offset', async () => {
    const { dir, segment } = await storeWithRecords(3)
    const offsets = recordOffsets(segment)
    flipByte(segment, offsets[1]! + LOG_HEADER_BYTES + 3)
    const error = await openError(dir)
    expect(error.file).toBe(segment)
    expect(error.offset).toBe(offsets[1]!)
    expect(error.message).toContain(segment)
    expect(error.message).toContain(`offset ${offsets[1]}`)
  })

  test('a flipped byte in a length field is damage, not a tear', async () => {
    const { dir, segment } = await storeWithRecords(3)
    const offsets = recordOffsets(segment)
    flipByte(segment, offsets[1]!)
    expect((await openError(dir)).offset).toBe(offsets[1]!)
  })

  test('a flipped byte in the last record is damage too: acknowledged writes are never dropped', async () => {
    const { dir, segment } = await storeWithRecords(3)
    const offsets = recordOffsets(segment)
    const size = statSync(segment).size
    flipByte(segment, offsets[2]! + LOG_HEADER_BYTES + 1)
    expect((await openError(dir)).offset).toBe(offsets[2]!)
    expect(statSync(segment).size).toBe(size) // refused, not "repaired"
  })

  test('a flipped byte in the snapshot is refused, naming the file and offset', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    for (let i = 1; i <= 20; i++) await put(store, consumer(`c${i}`, i))
    await store.close()
    const path = join(dir, SNAPSHOT)
    flipByte(path, Math.floor(statSync(path).size / 2))
    const error = await openError(dir)
    expect(error.file).toBe(path)
    expect(error.message).toContain(path)
    expect(error.message).toMatch(/offset \d+/)
    // A reader is refused as well.
    await openError(dir, { readOnly: true })
  })

  test('a snapshot or log record naming an unknown table is refused, not skipped', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    await store.close()
    const snapshot = (await readSnapshot(join(dir, SNAPSHOT)))!
    await writeSnapshot(join(dir, SNAPSHOT), { ...snapshot, tables: { ...snapshot.tables, widgets: [{ id: 'w' }] } })
    expect((await openError(dir)).message).toContain('unknown table widgets')

    const other = newDir()
    await openStore(other) // creates the first, empty segment
    const [segment] = await segmentPaths(other)
    writeAfterRecords(segment!, encodeRecord(Buffer.from(JSON.stringify({ lsn: 1, puts: [['constructor', { id: 'x' }]] }))))
    expect((await openError(other)).message).toContain('unknown table constructor')
  })

  /** Three segments and no snapshot: compactions whose snapshot write fails keep the old segments. */
  async function threeSegments(): Promise<{ dir: string; segments: string[] }> {
    const dir = newDir()
    const { store, logged } = await openStore(dir)
    // A directory where the snapshot's temp file goes makes the snapshot write fail at the OS.
    mkdirSync(join(dir, `${SNAPSHOT}.tmp`))
    writeFileSync(join(dir, `${SNAPSHOT}.tmp`, 'x'), '')
    for (let s = 0; s < 3; s++) {
      for (let i = 1; i <= 2; i++) await put(store, consumer(`c${s}${i}`, s * 10 + i))
      if (s < 2) await expect(store.compact()).rejects.toThrow()
    }
    expect(logged).toEqual([])
    rmSync(join(dir, `${SNAPSHOT}.tmp`), { recursive: true })
    await writerOf(store).file.close()
    stores.splice(stores.indexOf(store), 1)
    const segments = await segmentPaths(dir)
    expect(segments.map((p) => p.slice(-24))).toEqual(['wal-0000000000000001.log', 'wal-0000000000000003.log', 'wal-0000000000000005.log'])
    return { dir, segments }
  }

  test('a failed snapshot keeps every segment: nothing is lost', async () => {
    const { dir } = await threeSegments()
    expect(Object.keys(await durableConsumers(dir))).toHaveLength(6)
  })

  test('an LSN gap inside one segment is refused', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    const segment = writerOf(store).currentSegment.path
    // A record of LSN 3 right after LSN 1, as no writer ever leaves it.
    writeAfterRecords(segment, encodeRecord(JSON.stringify({ lsn: 3, puts: [['consumers', consumer('z', 9)]] })))
    await openError(dir, { readOnly: true })
  })

  test('a deleted middle segment (an LSN gap) is refused', async () => {
    const { dir, segments } = await threeSegments()
    unlinkSync(segments[1]!)
    const error = await openError(dir)
    expect(error.file).toBe(segments[2]!)
    expect(error.message).toContain('3..4 are missing')
  })

  test('a deleted first segment is refused', async () => {
    const { dir, segments } = await threeSegments()
    unlinkSync(segments[0]!)
    expect((await openError(dir)).file).toBe(segments[1]!)
  })

  test('a deleted snapshot with later segments is refused', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    for (let i = 1; i <= 3; i++) await put(store, consumer(`c${i}`, i))
    await store.compact()
    await put(store, consumer('c4', 4))
    await writerOf(store).file.close()
    stores.splice(stores.indexOf(store), 1)
    unlinkSync(join(dir, SNAPSHOT))
    expect((await openError(dir)).message).toContain('1..3 are missing')
  })

  test('a deleted snapshot after a clean shutdown (only an empty segment left) is refused', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    for (let i = 1; i <= 3; i++) await put(store, consumer(`c${i}`, i))
    await store.close()
    const [segment] = await segmentPaths(dir)
    expect(recordOffsets(segment!)).toEqual([])
    unlinkSync(join(dir, SNAPSHOT))
    const error = await openError(dir)
    expect(error.file).toBe(segment!)
    expect(error.message).toContain('1..3 are missing')
  })
})

describe('a failed append leaves no trace', () => {
  const storageError = (result: PromiseSettledResult<unknown>) => {
    expect(result.status).toBe('rejected')
    expect((result as PromiseRejectedResult).reason).toBeInstanceOf(StorageUnavailableError)
  }

  test('the OS refuses the write: commit, queued commits and waiting readers reject; nothing remains', async () => {
    const dir = newDir()
    const { store, logged, fatal } = await openStore(dir)
    await put(store, consumer('a', 1))
    const writer = writerOf(store)
    const segment = writer.currentSegment.path
    const size = statSync(segment).size
    const restore = await refuseWrites(writer, segment)

    const b = store.commit((tx) => {
      tx.put('consumers', consumer('b', 2))
      return tx.put('consumers', consumer('a', 3))
    })
    const barrierB = store.readBarrier()!
    expect(consumersOf(store)).toEqual({ a: 3, b: 2 }) // applied at once, not acknowledged yet
    const c = put(store, consumer('c', 4)) // queued behind b, made against b's state
    const barrierC = store.readBarrier()!
    expect(barrierB).toBeDefined()
    const results = await Promise.allSettled([b, c, barrierB, barrierC])
    results.forEach(storageError)

    expect(consumersOf(store)).toEqual({ a: 1 })
    expect(store.tables.consumers.ids()).toEqual(['a'])
    expect(store.readBarrier()).toBeUndefined()
    expect(statSync(segment).size).toBe(size)
    expect(await durableConsumers(dir)).toEqual({ a: 1 })
    expect(fatal).toEqual([])
    expect(logged.some((m) => m.includes('2 transaction(s) undone'))).toBe(true)

    // The disk is back: the store carries on, and the LSNs stay contiguous across a reopen.
    await restore()
    await put(store, consumer('d', 5))
    await store.close()
    const { store: again } = await openStore(dir)
    expect(consumersOf(again)).toEqual({ a: 1, d: 5 })
  })

  test('the OS fails the fsync after the bytes went out: they are cut off the file again', async () => {
    const dir = newDir()
    const { store, fatal } = await openStore(dir)
    await put(store, consumer('a', 1))
    const writer = writerOf(store)
    const segment = writer.currentSegment.path
    const size = statSync(segment).size
    const file = writer.file
    const datasync = file.datasync.bind(file)
    let failures = 1
    // fdatasync reporting EIO cannot be caused on demand from a test; this stands in for it.
    file.datasync = async () => {
      if (failures-- > 0) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })
      return datasync()
    }

    const end = scanLog(readFileSync(segment), segment).validEnd
    const b = put(store, consumer('b', 2))
    await expect(b).rejects.toBeInstanceOf(StorageUnavailableError)
    expect(statSync(segment).size).toBe(size)
    expect(readFileSync(segment).subarray(end).every((byte) => byte === 0)).toBe(true) // zeroed again
    expect(consumersOf(store)).toEqual({ a: 1 })
    expect(fatal).toEqual([])

    await put(store, consumer('c', 3))
    expect(await durableConsumers(dir)).toEqual({ a: 1, c: 3 })
  })

  test('a commit queued behind a batch whose fsync fails fails with it, even with the disk back for its own batch', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    const file = writerOf(store).file
    const datasync = file.datasync.bind(file)
    let failures = 1
    file.datasync = async () => {
      if (failures-- > 0) throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' })
      return datasync()
    }
    const b = put(store, consumer('b', 2))
    const c = put(store, consumer('c', 3)) // queued behind b's batch, made against b's state
    ;(await Promise.allSettled([b, c])).forEach(storageError)
    expect(consumersOf(store)).toEqual({ a: 1 })
    await put(store, consumer('d', 4))
    // What a process started after a crash would read (no close, no snapshot): the log alone.
    expect(await durableConsumers(dir)).toEqual({ a: 1, d: 4 })
  })

  test('a commit that changes nothing, made on state not yet durable, fails with the write it saw', async () => {
    const { store } = await openStore(newDir())
    await put(store, consumer('a', 1))
    const writer = writerOf(store)
    await refuseWrites(writer, writer.currentSegment.path)
    const b = put(store, consumer('b', 2))
    const unchanged = store.commit((tx) => tx.puts.length) // saw b in memory, wrote nothing
    ;(await Promise.allSettled([b, unchanged])).forEach(storageError)
  })
})

describe('compaction under load', () => {
  test('two queued transactions changing one record: the snapshot holds it as of the durable LSN', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    const b = put(store, consumer('b', 2)) // being written
    const c = put(store, consumer('a', 3)) // queued
    const d = put(store, consumer('a', 4)) // queued behind it
    await Promise.all([b, c, d, store.compact()])
    const snapshot = (await readSnapshot(join(dir, SNAPSHOT)))!
    expect(snapshot.lsn).toBe(2)
    expect((snapshot.tables.consumers as Consumer[]).map((record) => [record.consumer_id, record.modified])).toEqual([['a', 1], ['b', 2]])
  })

  test('compactions racing commits lose nothing, and each snapshot is exactly the state at its LSN', async () => {
    const dir = newDir()
    const { store } = await openStore(dir, { compactAfterBytes: Number.MAX_SAFE_INTEGER })
    const snapshotPath = join(dir, SNAPSHOT)
    // Every commit here succeeds, so LSNs follow the order the bodies ran in: `changes[n - 1]` is
    // what LSN n did, and the state at LSN L is the first L entries applied in order.
    const changes: [string, number][][] = []
    const stateAt = (lsn: number): Record<string, number> => {
      const state: Record<string, number> = {}
      for (const change of changes.slice(0, lsn)) for (const [id, value] of change) state[id] = value
      return state
    }
    let value = 0
    const writer = async (w: number) => {
      for (let i = 0; i < 60; i++) {
        await store.commit((tx) => {
          // Updates of shared records (pre-images matter) and inserts, sometimes two in one transaction.
          const change: [string, number][] = [[`c${(w * 7 + i) % 11}`, ++value]]
          if (i % 4 === 0) change.push([`w${w}-${i}`, ++value])
          for (const [id, n] of change) tx.put('consumers', consumer(id, n))
          changes.push(change)
        })
      }
    }
    const writers = Promise.all([0, 1, 2, 3, 4].map(writer))
    let done = false
    void writers.finally(() => (done = true))
    let snapshots = 0
    while (!done) {
      await store.compact()
      const snapshot = (await readSnapshot(snapshotPath))!
      const got = Object.fromEntries((snapshot.tables.consumers as Consumer[]).map((c) => [c.consumer_id, c.modified]))
      expect(got).toEqual(stateAt(snapshot.lsn))
      snapshots++
    }
    await writers
    expect(snapshots).toBeGreaterThan(2)
    expect(changes).toHaveLength(300)
    expect(await durableConsumers(dir)).toEqual(stateAt(300))
    await store.close()
    const { store: again } = await openStore(dir)
    expect(consumersOf(again)).toEqual(stateAt(300))
  })

  test('the log segment growing past compactAfterBytes starts a compaction by itself', async () => {
    const dir = newDir()
    const { store, logged } = await openStore(dir, { compactAfterBytes: 500 })
    for (let i = 1; i <= 30; i++) await put(store, consumer(`c${i}`, i))
    // No compact() here: wait only for one the writes started, if it still runs. How many records
    // the newest segment holds then depends on timing (the threshold grows with the snapshot), but
    // a compaction must have cut the log: one segment holding just what came after the snapshot.
    await (store as unknown as { compaction: Promise<unknown> | null }).compaction
    const snapshot = (await readSnapshot(join(dir, SNAPSHOT)))!
    expect(snapshot.lsn).toBeGreaterThan(0)
    expect((await listSegments(dir)).length).toBe(1)
    expect(recordOffsets((await segmentPaths(dir))[0]!).length).toBe(30 - snapshot.lsn) // put n is lsn n: the rest of the log
    expect(logged).toEqual([])
    expect(Object.keys(await durableConsumers(dir))).toHaveLength(30)
  })

  test('a compaction due by size that failed before its new segment existed is not tried again at every write, but after a wait that grows', async () => {
    const dir = newDir()
    const { store, logged } = await openStore(dir, { compactAfterBytes: 500 })
    const writer = writerOf(store)
    const rotate = writer.rotate.bind(writer)
    let rotations = 0
    // As a data dir that cannot be written refuses the new segment's file.
    writer.rotate = async () => {
      rotations++
      throw new Error("EACCES: permission denied, open 'wal-….log.tmp'")
    }
    const backoff = store as unknown as { compaction: Promise<unknown> | null; compactionRetryAt: number }
    for (let i = 1; i <= 20; i++) {
      await put(store, consumer(`c${i}`, i))
      await backoff.compaction?.catch(() => {})
    }
    // Every write was made; one attempt failed, and the writes after it (well within a second) started none.
    expect(Object.keys(await durableConsumers(dir))).toHaveLength(20)
    expect(rotations).toBe(1)
    expect(logged).toEqual([`snapshot failed, will retry in 1 s: EACCES: permission denied, open 'wal-….log.tmp'`])
    // Its wait over (set here rather than waited for), the next write tries again; failing, it waits twice as long.
    backoff.compactionRetryAt = 0
    await put(store, consumer('c21', 21))
    await backoff.compaction?.catch(() => {})
    expect([rotations, logged.at(-1)]).toEqual([2, `snapshot failed, will retry in 2 s: EACCES: permission denied, open 'wal-….log.tmp'`])
    // The dir writable again: a snapshot asked for (SIGUSR1) is written at once, and ends the backoff.
    writer.rotate = rotate
    expect(await store.compact()).toBe(true)
    expect((await readSnapshot(join(dir, SNAPSHOT)))!.lsn).toBe(21)
    const after = store as unknown as { compactionRetryAt: number; compactionRetryMs: number }
    expect([after.compactionRetryAt, after.compactionRetryMs]).toEqual([0, 1000])
    expect(logged).toHaveLength(2)
  })

  test('compaction waits until the log outgrows the last snapshot, so its cost per write stays flat', async () => {
    const dir = newDir()
    const { store } = await openStore(dir, { compactAfterBytes: 500 })
    for (let i = 1; i <= 200; i++) await put(store, consumer(`c${i}`, i))
    await store.compact()
    const snapshotBytes = statSync(join(dir, SNAPSHOT)).size
    const first = (await readSnapshot(join(dir, SNAPSHOT)))!.lsn
    // Far more than compactAfterBytes of log, but less than the snapshot: no new snapshot yet.
    let n = 200
    while (logSize(dir) < snapshotBytes / 2) await put(store, consumer(`c${++n}`, n))
    expect(logSize(dir)).toBeGreaterThan(500)
    expect((await readSnapshot(join(dir, SNAPSHOT)))!.lsn).toBe(first)
    // Past the snapshot's size: it compacts by itself.
    while ((await readSnapshot(join(dir, SNAPSHOT)))!.lsn === first && n < 5000) {
      await put(store, consumer(`c${++n}`, n))
      await (store as unknown as { compaction: Promise<void> | null }).compaction
    }
    expect((await readSnapshot(join(dir, SNAPSHOT)))!.lsn).toBeGreaterThan(first)
    expect(n).toBeLessThan(5000)
  })

  test('a snapshot never holds a write that was queued when it was taken and failed later', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    const writer = writerOf(store)
    let restore: (() => Promise<void>) | undefined
    const rotate = writer.rotate.bind(writer)
    // Right after the snapshot's view is taken and the log rotated, the new segment refuses writes.
    writer.rotate = async () => {
      writer.rotate = rotate // once: later rotations (the close in afterEach) are ordinary
      const segment = await rotate()
      restore = await refuseWrites(writer, segment.path)
      return segment
    }

    const b = put(store, consumer('b', 2)) // being written when the compaction asks for a turn
    const c = store.commit((tx) => {
      tx.put('consumers', consumer('c', 3))
      tx.put('consumers', consumer('a', 4))
    }) // queued: the view must show a and c as they were before it
    const compaction = store.compact()
    await b
    await expect(c).rejects.toBeInstanceOf(StorageUnavailableError)
    await compaction

    const snapshot = (await readSnapshot(join(dir, SNAPSHOT)))!
    expect(snapshot.lsn).toBe(2)
    expect((snapshot.tables.consumers as Consumer[]).map((r) => [r.consumer_id, r.modified])).toEqual([
      ['a', 1],
      ['b', 2],
    ])
    expect(consumersOf(store)).toEqual({ a: 1, b: 2 })

    await restore!()
    await put(store, consumer('d', 5))
    expect(await durableConsumers(dir)).toEqual({ a: 1, b: 2, d: 5 })
  })

  test('a queued transaction that changes one record twice: the snapshot has the record as it was before', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    const b = put(store, consumer('b', 2)) // being written
    const c = store.commit((tx) => {
      tx.put('consumers', consumer('a', 3))
      tx.put('consumers', consumer('a', 4))
    }) // queued when the view is taken
    const compaction = store.compact()
    await Promise.all([b, c, compaction])
    const snapshot = (await readSnapshot(join(dir, SNAPSHOT)))!
    expect(snapshot.lsn).toBe(2)
    expect((snapshot.tables.consumers as Consumer[]).map((r) => [r.consumer_id, r.modified])).toEqual([
      ['a', 1],
      ['b', 2],
    ])
    expect(await durableConsumers(dir)).toEqual({ a: 4, b: 2 })
  })
})

describe('files', () => {
  test('data files are 0600 and the data dir 0700, even when the dir existed with looser bits', async () => {
    const dir = newDir()
    chmodSync(dir, 0o755)
    const { store } = await openStore(dir)
    await initialiseStorage(new EmbeddedStorage(store), 'Vendor', 'init')
    await put(store, consumer('a', 1))
    await store.compact()
    await put(store, consumer('b', 2))
    await store.close()
    expect(statSync(dir).mode & 0o777).toBe(0o700)
    const names = readdirSync(dir)
    expect(names).toContain(SNAPSHOT)
    expect(names.some((n) => n.startsWith('wal-'))).toBe(true)
    for (const name of names) expect([name, statSync(join(dir, name)).mode & 0o777]).toEqual([name, 0o600])
  })

  test('a read-only open beside a writer sees its durable records and changes nothing', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await put(store, consumer('a', 1))
    await store.compact()
    await put(store, consumer('b', 2))
    const listing = () => readdirSync(dir).map((n) => [n, statSync(join(dir, n)).size])
    const before = listing()

    const { store: reader } = await openStore(dir, { readOnly: true })
    expect(consumersOf(reader)).toEqual({ a: 1, b: 2 })
    await expect(reader.commit((tx) => tx.put('consumers', consumer('z', 9)))).rejects.toThrow(/read-only/)
    await expect(reader.compact()).rejects.toThrow(/read-only/)
    await reader.close()
    expect(listing()).toEqual(before)

    // The writer goes on; a later reader sees that too.
    await put(store, consumer('c', 3))
    expect(await durableConsumers(dir)).toEqual({ a: 1, b: 2, c: 3 })
  })
})

describe('data dirs from before the enrollment nickname was derived', () => {
  const stored = {
    enrollment_id: 'e0000000-0000-4000-8000-000000000001',
    organization_id: 'o0000000-0000-4000-8000-000000000001',
    consumer_id: 'c0000000-0000-4000-8000-000000000001',
    installation_id: 'i0000000-0000-4000-8000-000000000001',
    application_id: 'a0000000-0000-4000-8000-000000000001',
    environment: 'PRODUCTION',
    active_keyset_id: null,
    client_enclave_key: null,
    state: 'active',
    created: 1,
    modified: 1,
  }
  const withNickname = { ...stored, nickname: 'i:c:a:PRODUCTION' }

  test('a snapshot record loses its stored nickname on loading', async () => {
    const dir = newDir()
    await writeSnapshot(join(dir, SNAPSHOT), { format: 1, lsn: 0, meta: {}, tables: { enrollments: [withNickname] } })
    const { store } = await openStore(dir)
    expect(store.tables.enrollments.get(stored.enrollment_id)).toEqual(stored as never)
    expect(Object.hasOwn(store.tables.enrollments.get(stored.enrollment_id)!, 'nickname')).toBe(false)
  })

  test('a log record loses it on replay', async () => {
    const dir = newDir()
    const first = await openStore(dir)
    await first.store.commit((tx) => tx.put('enrollments', withNickname as never))
    await (first.store as unknown as { writer: { close(): Promise<void> } }).writer.close() // no snapshot: replay the log
    stores.splice(stores.indexOf(first.store), 1)
    const { store } = await openStore(dir)
    expect(Object.hasOwn(store.tables.enrollments.get(stored.enrollment_id)!, 'nickname')).toBe(false)
    expect(store.tables.enrollments.get(stored.enrollment_id)).toEqual(stored as never)
  })
})

describe('retention: dropping the oldest records (audit events)', () => {
  const event = (n: number, customer: string | null = 'c1'): AuditEvent => ({
    event_id: `e${String(n).padStart(3, '0')}`,
    action: 'consumer.create',
    target_type: 'consumer',
    target_id: `t${n % 3}`,
    actor_organization_id: null,
    actor_token_id: null,
    actor_role: null,
    actor_cli: 'test',
    customer_id: customer,
    changes: {},
    trace_id: null,
    created: n,
    modified: n,
  })
  const addEvents = (store: Store, from: number, to: number) =>
    store.commit((tx) => {
      for (let n = from; n <= to; n++) tx.put('audit_events', event(n, n % 2 === 0 ? 'c1' : null))
    })
  const eventIds = (store: Store) => [...store.tables.audit_events.ids()]
  /** The ids of the events a snapshot holds, its lines loaded as start-up loads them (recovery.ts). */
  const snapshotEventIds = (snapshot: LoadedSnapshot) => {
    const table = new AuditEventTable()
    for (const line of snapshot.tables.audit_events!) {
      if (Array.isArray(line)) table.loadSnapshotLine(line)
      else table.loadStored(line as Record<string, unknown>)
    }
    return [...table.ids()]
  }
  /** Copies of the events' index lists (the table's own are live). */
  const indexLists = (store: Store) => ({
    customer: [...store.tables.audit_events.idsBy('customer', 'c1')],
    targets: ['t0', 't1', 't2'].map((t) => [...store.tables.audit_events.idsBy('target', t)]),
  })
  const closeWithoutSnapshot = async (store: Store) => {
    await (store as unknown as { writer: { close(): Promise<void> } }).writer.close()
    stores.splice(stores.indexOf(store), 1)
  }

  test('the oldest go, from the table and every index; replayed from the log; kept out of snapshots', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await addEvents(store, 1, 10)
    expect(await store.commit((tx) => tx.dropOldest('audit_events', 4))).toBe(4)
    expect(eventIds(store)).toEqual(['e005', 'e006', 'e007', 'e008', 'e009', 'e010'])
    expect(indexLists(store)).toEqual({ customer: ['e006', 'e008', 'e010'], targets: [['e006', 'e009'], ['e007', 'e010'], ['e005', 'e008']] })
    const expected = indexLists(store)
    await closeWithoutSnapshot(store)

    const replayed = (await openStore(dir)).store
    expect(eventIds(replayed)).toEqual(['e005', 'e006', 'e007', 'e008', 'e009', 'e010'])
    expect(indexLists(replayed)).toEqual(expected)
    await replayed.commit((tx) => tx.dropOldest('audit_events', 1))
    await replayed.compact()
    expect(snapshotEventIds((await readSnapshot(join(dir, SNAPSHOT)))!)).toEqual(['e006', 'e007', 'e008', 'e009', 'e010'])
    await replayed.close()
    stores.splice(stores.indexOf(replayed), 1)
    const again = (await openStore(dir)).store
    expect(eventIds(again)).toEqual(['e006', 'e007', 'e008', 'e009', 'e010'])
  })

  test('a drop whose log write fails is undone: the records are back at the head, in order, in every index', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await addEvents(store, 1, 6)
    const before = { ids: eventIds(store), indexes: indexLists(store) }
    const restore = await refuseWrites(writerOf(store), writerOf(store).currentSegment.path)
    const drop = store.commit((tx) => tx.dropOldest('audit_events', 3))
    expect(eventIds(store)).toEqual(['e004', 'e005', 'e006']) // applied at once, not durable yet
    await expect(drop).rejects.toBeInstanceOf(StorageUnavailableError)
    expect({ ids: eventIds(store), indexes: indexLists(store) }).toEqual(before)
    await restore()
    await addEvents(store, 7, 7)
    expect(eventIds(store)).toEqual(['e001', 'e002', 'e003', 'e004', 'e005', 'e006', 'e007'])
  })

  test('a snapshot taken while a drop is queued still holds the dropped records', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    await addEvents(store, 1, 4)
    const writing = addEvents(store, 5, 5) // being written when the compaction asks for a turn
    const drop = store.commit((tx) => tx.dropOldest('audit_events', 2)) // queued when the view is taken
    const compaction = store.compact()
    await Promise.all([writing, drop, compaction])
    const snapshot = (await readSnapshot(join(dir, SNAPSHOT)))!
    expect(snapshot.lsn).toBe(2)
    expect(snapshotEventIds(snapshot)).toEqual(['e001', 'e002', 'e003', 'e004', 'e005'])
    await store.close()
    stores.splice(stores.indexOf(store), 1)
    expect(eventIds((await openStore(dir)).store)).toEqual(['e003', 'e004', 'e005'])
  })

  test('purgeAuditEvents drops only events older than the cutoff, at most `limit` at a time', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    const storage = new EmbeddedStorage(store)
    await addEvents(store, 1, 10)
    expect(await storage.purgeAuditEvents(8, 3)).toBe(3)
    expect(await storage.purgeAuditEvents(8, 3)).toBe(3)
    expect(await storage.purgeAuditEvents(8, 3)).toBe(1)
    expect(await storage.purgeAuditEvents(8, 3)).toBe(0)
    expect(eventIds(store)).toEqual(['e008', 'e009', 'e010'])
  })
})

describe('audit events in the log (docs/storage.md "Audit events in the log")', () => {
  const createEvent = (id: string, target: Consumer, changes: AuditEvent['changes']): AuditEvent => ({
    event_id: id,
    action: 'consumer.create',
    target_type: 'consumer',
    target_id: target.consumer_id,
    actor_organization_id: null,
    actor_token_id: null,
    actor_role: null,
    actor_cli: 'test',
    customer_id: 'org',
    changes,
    trace_id: null,
    created: target.created,
    modified: target.created,
  })
  const loggedEvents = async (dir: string) => {
    const events: unknown[][] = []
    for (const path of await segmentPaths(dir)) {
      for (const payload of scanLog(readFileSync(path), path).payloads) {
        for (const [table, row] of JSON.parse(Buffer.from(payload).toString('utf8')).puts) if (table === 'audit_events') events.push(row)
      }
    }
    return events
  }

  test('only changes that are exactly the create of a record beside them are left out, and replay gives every event back', async () => {
    const dir = newDir()
    const { store } = await openStore(dir)
    const a = consumer('a', 1)
    const b = consumer('b', 2)
    const c = { ...consumer('c', 3), extra: undefined } as Consumer
    await store.commit((tx) => {
      tx.put('consumers', a)
      tx.put('audit_events', createEvent('e1', a, changesOf(null, a)))
      // Not the create of the record logged: another value, a field missing, a field undefined (left out of the record's JSON).
      tx.put('consumers', b)
      tx.put('audit_events', createEvent('e2', b, { ...changesOf(null, b), state: [null, 'suspended'] }))
      tx.put('audit_events', createEvent('e3', b, changesOf(null, { consumer_id: 'b' })))
      tx.put('consumers', c)
      tx.put('audit_events', createEvent('e4', c, changesOf(null, c)))
      // No record of its target in this log record.
      tx.put('audit_events', createEvent('e5', consumer('gone', 4), changesOf(null, consumer('gone', 4))))
    })
    // A log record of many puts (its records are found through a map, log-record.ts).
    const many = Array.from({ length: 20 }, (_, n) => consumer(`m${n}`, 10 + n))
    await store.commit((tx) => {
      for (const [n, record] of many.entries()) {
        tx.put('consumers', record)
        tx.put('audit_events', createEvent(`f${n}`, record, changesOf(null, n === 7 ? { ...record, state: 'suspended' } : record)))
      }
    })
    // Rows: the event's 12 fields, then its changes unless left out.
    expect((await loggedEvents(dir)).map((row) => [row[0], row.length === 13])).toEqual([
      ['e1', false],
      ['e2', true],
      ['e3', true],
      ['e4', true],
      ['e5', true],
      ...many.map((_, n) => [`f${n}`, n === 7]),
    ])
    const replayed = await Store.open(dir, { readOnly: true })
    expect([...replayed.tables.audit_events.values()]).toEqual([...store.tables.audit_events.values()])
    expect(replayed.tables.audit_events.get('e1')!.changes).toEqual(changesOf(null, a))
  })

  test('an event row without changes and without the record they come from, or of another length, is damage', async () => {
    const dir = newDir()
    await openStore(dir) // creates the first, empty segment
    const [segment] = await segmentPaths(dir)
    const { changes: _left, ...event } = createEvent('e1', consumer('a', 1), {})
    const row = Object.values(event)
    writeAfterRecords(segment!, encodeRecord(Buffer.from(JSON.stringify({ lsn: 1, puts: [['audit_events', row]] }))))
    expect((await openError(dir)).message).toContain('audit event e1 has no changes and no record they come from')

    const other = newDir()
    await openStore(other)
    const [otherSegment] = await segmentPaths(other)
    writeAfterRecords(otherSegment!, encodeRecord(Buffer.from(JSON.stringify({ lsn: 1, puts: [['audit_events', row.slice(0, 5)]] }))))
    expect((await openError(other)).message).toContain('an audit event row of 5 values')
  })
})
