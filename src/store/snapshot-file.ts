/**
 * Durable, checksummed snapshot files, usable as a lowdb adapter:
 * `new Low(new SnapshotFile(path), null)`.
 *
 * The file is one JSON document with one record per line, so any JSON tool can read it:
 *
 *   {"format":1,"lsn":42,"meta":{...},"tables":{
 *   "organizations":[
 *   {...},
 *   {...}
 *   ],
 *   "applications":[
 *   ]},
 *   "integrity":{"algorithm":"crc32","blocks":[[0,1048576,3735928559],[1048576,1300000,123]]}}
 *
 * The integrity line lists `[start, end, crc32]` blocks of about 1 MiB (cut at line ends) that
 * cover every byte before it, so reading can name the first damaged byte range.
 *
 * A table's line is a record (an object), or an array for what a table writes in a form of its own:
 * the audit events' dictionary and encoded bytes (data format 4, audit-table.ts
 * `CapturedAuditEvents`). This file only carries those lines; the table reads them.
 */
import type { FileHandle } from 'node:fs/promises'
import { open, rename, rm } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Adapter } from 'lowdb'
import { fsyncDir, isErrnoCode, readExactly } from './fs-util'

export type SnapshotData = {
  format: 1
  lsn: number
  meta: Record<string, unknown>
  tables: Record<string, Iterable<unknown>>
}

/** What reading returns: the same shape, with every table as an array. */
export type LoadedSnapshot = SnapshotData & { tables: Record<string, unknown[]> }

export class SnapshotDamageError extends Error {
  readonly file: string
  readonly offset: number

  constructor(file: string, offset: number, reason: string) {
    super(`${file}: damaged snapshot at offset ${offset}: ${reason}`)
    this.name = 'SnapshotDamageError'
    this.file = file
    this.offset = offset
  }
}

/** Target size of a checksummed block, and of each write to the file. */
const BLOCK_CHARS = 1024 * 1024
/** How much of the file's end is searched for the integrity line first. */
const TRAILER_SEARCH_BYTES = 1024 * 1024
/** Give other work on the event loop a turn at least this often while serializing. */
const RECORDS_PER_YIELD = 5000
/** Starts the trailer line; no other line can start this way (records are `{...}` lines). */
const TRAILER_PREFIX = '"integrity":{"algorithm":"crc32",'

type Block = [start: number, end: number, crc: number]

/**
 * Typed as an adapter of `SnapshotData | null` so `new Low(new SnapshotFile(path), null)` compiles
 * and `db.data` is honestly null until a snapshot is read or assigned; writing null rejects.
 */
export class SnapshotFile implements Adapter<SnapshotData | null> {
  readonly #path: string
  // Writes share one temp file name, so they must not overlap.
  #lastWrite: Promise<void> = Promise.resolve()

  constructor(path: string) {
    this.#path = path
  }

  read(): Promise<LoadedSnapshot | null> {
    return readSnapshot(this.#path)
  }

  write(data: SnapshotData | null): Promise<void> {
    if (data === null) return Promise.reject(new TypeError('cannot write a null snapshot'))
    const next = this.#lastWrite.then(() => writeSnapshot(this.#path, data))
    this.#lastWrite = next.catch(() => undefined) // a failed write must not block later ones
    return next
  }
}

// ---------------------------------------------------------------------------------------------
// Reading

/** Reads and verifies a whole snapshot into memory; null if the file does not exist. */
export async function readSnapshot(path: string): Promise<LoadedSnapshot | null> {
  const tables: Record<string, unknown[]> = {}
  const header = await scanSnapshot(path, (name) => {
    const records: unknown[] = (tables[name] = [])
    return (record) => records.push(record)
  })
  return header && { ...header, tables }
}

/** A line of a table: a record, or an array (see the top of this file). */
export type TableLine = Record<string, unknown> | unknown[]

/**
 * Where `scanSnapshot` hands a table's lines; throwing stops the scan. A SnapshotLineError is
 * reported as damage at that line.
 */
export type RecordSink = (line: TableLine) => void

/** A line of a table that its reader refuses: the snapshot is damaged there. */
export class SnapshotLineError extends Error {
  constructor(reason: string) {
    super(reason)
    this.name = 'SnapshotLineError'
  }
}

export type SnapshotHeader = Pick<LoadedSnapshot, 'format' | 'lsn' | 'meta'>

/**
 * Streams a snapshot block by block: each ~1 MiB block is read, checked against its checksum, then
 * parsed line by line (one record per line), so memory holds one block, never the whole file.
 * `onTable` is called as each table begins and returns where its records go. Resolves with the
 * header (null if the file does not exist). Damage anywhere rejects with a SnapshotDamageError,
 * possibly after earlier blocks' records were handed over: a caller must then discard them.
 */
export async function scanSnapshot(path: string, onTable: (name: string) => RecordSink): Promise<SnapshotHeader | null> {
  let handle: FileHandle
  try {
    handle = await open(path, 'r')
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return null
    throw error
  }
  try {
    const size = (await handle.stat()).size
    const { trailerStart, blocks } = await readTrailer(handle, size, path)
    checkTiling(blocks, trailerStart, path)
    const parser = new DocumentParser(path, onTable)
    const decoder = new TextDecoder('utf-8', { fatal: true })
    let buffer = Buffer.allocUnsafe(0)
    for (const [start, end, crc] of blocks) {
      if (buffer.length < end - start) buffer = Buffer.allocUnsafe(end - start)
      const bytes = buffer.subarray(0, end - start)
      await readExactly(handle, bytes, start)
      if (Bun.hash.crc32(bytes) !== crc) throw new SnapshotDamageError(path, start, 'block checksum mismatch')
      let text: string
      try {
        text = decoder.decode(bytes)
      } catch (error) {
        throw new SnapshotDamageError(path, start, `invalid JSON (${errorMessage(error)})`)
      }
      parser.parseLines(text, start)
    }
    return parser.finish()
  } finally {
    await handle.close()
  }
}

/** The integrity line, found in the file's tail (or, failing that, anywhere: the damage case). */
async function readTrailer(handle: FileHandle, size: number, path: string): Promise<{ trailerStart: number; blocks: Block[] }> {
  // About 40 bytes per 1 MiB block: the tail holds the trailer of any snapshot under ~25 GiB.
  for (const tailBytes of [Math.min(size, TRAILER_SEARCH_BYTES), size]) {
    const tail = Buffer.allocUnsafe(tailBytes)
    await readExactly(handle, tail, size - tailBytes)
    const at = tail.lastIndexOf(`\n${TRAILER_PREFIX}`)
    if (at >= 0) {
      const trailerStart = size - tailBytes + at + 1
      return { trailerStart, blocks: parseTrailer(tail.subarray(at + 1), path, trailerStart) }
    }
    if (tailBytes === size) break
  }
  throw new SnapshotDamageError(path, size, 'integrity trailer missing')
}

function parseTrailer(trailer: Uint8Array, path: string, offset: number): Block[] {
  const damaged = (): SnapshotDamageError =>
    new SnapshotDamageError(path, offset, 'unreadable integrity trailer')
  // The line is `"integrity":{...}}` plus a newline: the last `}` closes the whole document.
  const text = new TextDecoder().decode(trailer).replace(/\n$/, '')
  const prefix = '"integrity":'
  if (!text.startsWith(prefix) || !text.endsWith('}')) throw damaged()
  let integrity: unknown
  try {
    integrity = JSON.parse(text.slice(prefix.length, -1))
  } catch {
    throw damaged()
  }
  if (!isRecord(integrity) || integrity.algorithm !== 'crc32') throw damaged()
  const blocks = integrity.blocks
  if (!Array.isArray(blocks) || !blocks.every(isBlock)) throw damaged()
  return blocks
}

function isBlock(value: unknown): value is Block {
  return (
    Array.isArray(value) &&
    value.length === 3 &&
    value.every((n) => Number.isSafeInteger(n) && n >= 0) &&
    value[2] <= 0xffff_ffff
  )
}

/** Blocks must tile [0, trailerStart) exactly (their checksums are checked as they are read). */
function checkTiling(blocks: Block[], trailerStart: number, path: string): void {
  let expectedStart = 0
  for (const [start, end] of blocks) {
    if (start !== expectedStart || end <= start || end > trailerStart) {
      throw new SnapshotDamageError(path, expectedStart, 'integrity blocks do not cover the file')
    }
    expectedStart = end
  }
  if (expectedStart !== trailerStart) {
    throw new SnapshotDamageError(path, expectedStart, 'integrity blocks do not cover the file')
  }
}

/**
 * The document, line by line, as the writer lays it out:
 *
 *   {"format":1,"lsn":42,"meta":{...},"tables":{     header
 *   "organizations":[                                 a table begins
 *   {...},                                            a record (the last of a table has no comma)
 *   [...],                                            or a line of a table's own form
 *   ],                                                a table ends, another follows
 *   ]},                                               the last table ends
 *
 * Checksums already vouch for the bytes; a line out of place still means a writer bug, and is
 * reported as damage at that line.
 */
class DocumentParser {
  #header: SnapshotHeader | undefined
  #sink: RecordSink | undefined
  #ended = false

  constructor(
    private readonly path: string,
    private readonly onTable: (name: string) => RecordSink,
  ) {}

  /** `text` is whole lines, starting at byte `offset` of the file. */
  parseLines(text: string, offset: number): void {
    const damaged = (from: number, reason: string) =>
      // Only an error needs the line's byte offset (UTF-8 may differ from the string index).
      new SnapshotDamageError(this.path, offset + Buffer.byteLength(text.slice(0, from)), reason)
    let from = 0
    while (from < text.length) {
      let end = text.indexOf('\n', from)
      if (end === -1) end = text.length
      const sink = this.#sink
      const first = text.charCodeAt(from)
      if (sink && (first === 0x7b /* { */ || first === 0x5b) /* [ */) {
        // The hot path, one record per line: no per-line allocation beyond the record itself.
        const last = text.charCodeAt(end - 1) === 0x2c /* , */ ? end - 1 : end
        const line = parseJson(text.slice(from, last), (reason) => damaged(from, reason))
        if (first === 0x7b ? !isRecord(line) : !Array.isArray(line)) throw damaged(from, 'a line of a table is neither a record nor an array')
        try {
          sink(line as TableLine)
        } catch (error) {
          if (error instanceof SnapshotLineError) throw damaged(from, error.message)
          throw error
        }
      } else {
        this.#structuralLine(text.slice(from, end), (reason) => damaged(from, reason))
      }
      from = end + 1
    }
  }

  finish(): SnapshotHeader {
    if (!this.#header || !this.#ended) throw new SnapshotDamageError(this.path, 0, 'invalid JSON (the document is incomplete)')
    return this.#header
  }

  /** Every line but a record's: the header, a table's start, a table's end. */
  #structuralLine(line: string, damaged: (reason: string) => SnapshotDamageError): void {
    if (this.#ended) throw damaged('invalid JSON (text after the last table)')
    if (!this.#header) {
      this.#header = parseHeader(line, damaged)
    } else if (line.charCodeAt(0) === 0x22 /* " */ && line.endsWith(':[') && !this.#sink) {
      const name = parseJson(line.slice(0, -2), damaged)
      if (typeof name !== 'string') throw damaged('a table name is not a string')
      this.#sink = this.onTable(name)
    } else if (line === '],' && this.#sink) {
      this.#sink = undefined
    } else if ((line === ']},' && this.#sink) || (line === '},' && !this.#sink)) {
      this.#sink = undefined
      this.#ended = true
    } else {
      throw damaged('invalid JSON (unexpected line)')
    }
  }
}

function parseHeader(line: string, damaged: (reason: string) => SnapshotDamageError): SnapshotHeader {
  if (!line.endsWith('"tables":{')) throw damaged('invalid JSON (the first line does not open the tables)')
  const doc = parseJson(`${line}}}`, damaged)
  if (!isRecord(doc) || doc.format !== 1) throw damaged('not a format 1 snapshot')
  const { lsn, meta } = doc
  if (typeof lsn !== 'number' || !isRecord(meta)) throw damaged('missing lsn, meta or tables')
  return { format: 1, lsn, meta }
}

function parseJson(text: string, damaged: (reason: string) => SnapshotDamageError): unknown {
  try {
    return JSON.parse(text)
  } catch (error) {
    throw damaged(`invalid JSON (${errorMessage(error)})`)
  }
}

// ---------------------------------------------------------------------------------------------
// Writing

/**
 * Writes a snapshot durably: serialize to `<path>.tmp` (mode 0600), fsync it, rename it over
 * `<path>`, fsync the directory. Each table iterable is consumed exactly once. Callers must not
 * run two writes to the same path at once (SnapshotFile queues its own).
 */
export async function writeSnapshot(path: string, data: SnapshotData): Promise<void> {
  const tmp = `${path}.tmp`
  let handle: FileHandle | undefined
  try {
    await rm(tmp, { force: true }) // left over from a crash; 'wx' below needs it gone
    handle = await open(tmp, 'wx', 0o600)
    await serialize(handle, data)
    await handle.sync()
    await handle.close()
    handle = undefined
    await rename(tmp, path)
    await fsyncDir(dirname(path)) // the rename
  } catch (error) {
    await handle?.close().catch(() => undefined)
    await rm(tmp, { force: true }).catch(() => undefined)
    throw error
  }
}

/** Streams the document into the file ~1 MiB at a time, then appends the integrity line. */
async function serialize(handle: FileHandle, data: SnapshotData): Promise<void> {
  if (!Number.isSafeInteger(data.lsn) || data.lsn < 0) throw new RangeError(`invalid lsn ${data.lsn}`)
  const out = new BlockWriter(handle)
  out.add(`{"format":1,"lsn":${data.lsn},"meta":${stringify(data.meta)},"tables":{`)
  // `endLine` says when a block is due: awaited then, not once a line (a million records, a million awaits).
  if (out.endLine()) await out.flush()

  let recordCount = 0
  let firstTable = true
  for (const [name, records] of Object.entries(data.tables)) {
    if (!firstTable) {
      out.add(',')
      if (out.endLine()) await out.flush()
    }
    firstTable = false
    out.add(`${JSON.stringify(name)}:[`)
    if (out.endLine()) await out.flush()

    // The comma goes on the previous line because we cannot know which record is the last.
    let firstRecord = true
    for (const record of records) {
      if (!firstRecord) {
        out.add(',')
        if (out.endLine()) await out.flush()
      }
      firstRecord = false
      out.add(stringify(record))
      if (++recordCount % RECORDS_PER_YIELD === 0) await yieldToEventLoop()
    }
    if (!firstRecord && out.endLine()) await out.flush()
    out.add(']')
  }
  out.add('},')
  if (out.endLine()) await out.flush()

  const blocks = await out.finish()
  const trailer = `${TRAILER_PREFIX}"blocks":${JSON.stringify(blocks)}}}\n`
  await writeAll(handle, Buffer.from(trailer))
}

/** Buffers text and writes it out in line-aligned, checksummed blocks. */
class BlockWriter {
  readonly #handle: FileHandle
  readonly #blocks: Block[] = []
  #parts: string[] = []
  #chars = 0
  #position = 0

  constructor(handle: FileHandle) {
    this.#handle = handle
  }

  add(text: string): void {
    this.#parts.push(text)
    this.#chars += text.length
  }

  /**
   * Ends the current line, and says whether a block is due: then `flush` before adding more. Blocks
   * are only cut at line ends.
   */
  endLine(): boolean {
    this.add('\n')
    // UTF-8 never has fewer bytes than UTF-16 code units, so blocks are at least BLOCK_CHARS bytes.
    return this.#chars >= BLOCK_CHARS
  }

  /** Writes whatever is buffered and returns the blocks covering everything written. */
  async finish(): Promise<Block[]> {
    if (this.#chars > 0) await this.flush()
    return this.#blocks
  }

  /** Writes what is buffered as one block (call it at a line end). */
  async flush(): Promise<void> {
    const bytes = Buffer.from(this.#parts.join(''))
    this.#parts = []
    this.#chars = 0
    const start = this.#position
    this.#position += bytes.length
    this.#blocks.push([start, this.#position, Bun.hash.crc32(bytes)])
    await writeAll(this.#handle, bytes)
  }
}

/** JSON for one value on one line; undefined, functions and symbols have no JSON form. */
function stringify(value: unknown): string {
  const json: string | undefined = JSON.stringify(value)
  if (json === undefined) throw new TypeError(`cannot write ${typeof value} to a snapshot`)
  return json
}

async function writeAll(handle: FileHandle, bytes: Uint8Array): Promise<void> {
  let written = 0
  while (written < bytes.length) {
    const { bytesWritten } = await handle.write(bytes, written, bytes.length - written)
    written += bytesWritten
  }
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}
