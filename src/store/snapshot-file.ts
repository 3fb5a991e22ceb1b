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
 */
import type { FileHandle } from 'node:fs/promises'
import { open, readFile, rename, rm } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { Adapter } from 'lowdb'

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

/** Reads and verifies a snapshot; null if the file does not exist. */
export async function readSnapshot(path: string): Promise<LoadedSnapshot | null> {
  let bytes: Uint8Array
  try {
    bytes = await readFile(path)
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return null
    throw error
  }
  const trailerStart = findTrailer(bytes, path)
  const blocks = parseTrailer(bytes.subarray(trailerStart), path, trailerStart)
  verifyBlocks(bytes, blocks, trailerStart, path)
  return parseDocument(bytes, path)
}

/** Offset of the integrity line; its absence means the file was cut short. */
function findTrailer(bytes: Uint8Array, path: string): number {
  const marker = Buffer.from(`\n${TRAILER_PREFIX}`)
  const at = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).lastIndexOf(marker)
  if (at < 0) throw new SnapshotDamageError(path, bytes.length, 'integrity trailer missing')
  return at + 1
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

/** Blocks must tile [0, trailerStart) exactly, and each must match its checksum. */
function verifyBlocks(bytes: Uint8Array, blocks: Block[], trailerStart: number, path: string): void {
  let expectedStart = 0
  for (const [start, end, crc] of blocks) {
    if (start !== expectedStart || end <= start || end > trailerStart) {
      throw new SnapshotDamageError(path, expectedStart, 'integrity blocks do not cover the file')
    }
    if (Bun.hash.crc32(bytes.subarray(start, end)) !== crc) {
      throw new SnapshotDamageError(path, start, 'block checksum mismatch')
    }
    expectedStart = end
  }
  if (expectedStart !== trailerStart) {
    throw new SnapshotDamageError(path, expectedStart, 'integrity blocks do not cover the file')
  }
}

/** Parses verified bytes; a failure here means a writer bug, still reported as damage. */
function parseDocument(bytes: Uint8Array, path: string): LoadedSnapshot {
  let doc: unknown
  try {
    doc = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes))
  } catch (error) {
    throw new SnapshotDamageError(path, 0, `invalid JSON (${errorMessage(error)})`)
  }
  if (!isRecord(doc) || doc.format !== 1) {
    throw new SnapshotDamageError(path, 0, 'not a format 1 snapshot')
  }
  const { lsn, meta, tables } = doc
  if (typeof lsn !== 'number' || !isRecord(meta) || !isRecord(tables)) {
    throw new SnapshotDamageError(path, 0, 'missing lsn, meta or tables')
  }
  for (const [name, records] of Object.entries(tables)) {
    if (!Array.isArray(records)) throw new SnapshotDamageError(path, 0, `table ${name} is not an array`)
  }
  return { format: 1, lsn, meta, tables: tables as Record<string, unknown[]> }
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
    await syncDirectory(dirname(path))
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
  await out.endLine()

  let recordCount = 0
  let firstTable = true
  for (const [name, records] of Object.entries(data.tables)) {
    if (!firstTable) {
      out.add(',')
      await out.endLine()
    }
    firstTable = false
    out.add(`${JSON.stringify(name)}:[`)
    await out.endLine()

    // The comma goes on the previous line because we cannot know which record is the last.
    let firstRecord = true
    for (const record of records) {
      if (!firstRecord) {
        out.add(',')
        await out.endLine()
      }
      firstRecord = false
      out.add(stringify(record))
      if (++recordCount % RECORDS_PER_YIELD === 0) await yieldToEventLoop()
    }
    if (!firstRecord) await out.endLine()
    out.add(']')
  }
  out.add('},')
  await out.endLine()

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

  /** Ends the current line; blocks are only cut here, so they always end at a line end. */
  async endLine(): Promise<void> {
    this.add('\n')
    // UTF-8 never has fewer bytes than UTF-16 code units, so blocks are at least BLOCK_CHARS bytes.
    if (this.#chars >= BLOCK_CHARS) await this.#flush()
  }

  /** Writes whatever is buffered and returns the blocks covering everything written. */
  async finish(): Promise<Block[]> {
    if (this.#chars > 0) await this.#flush()
    return this.#blocks
  }

  async #flush(): Promise<void> {
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

/** Makes a rename in `dir` durable. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
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

function isErrnoCode(error: unknown, code: string): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === code
}
