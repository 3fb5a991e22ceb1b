/**
 * WAL record framing. Each record is, little-endian:
 *
 *   [u32 payloadLength][u32 crc32(payload)][u32 crc32(first 8 header bytes)][payload]
 *
 * The header has its own checksum so that a flipped bit in a length field in the middle of the
 * file is reported as damage instead of being mistaken for a torn tail (which would silently drop
 * every later record).
 *
 * A segment file is always longer than its records: the writer grows it ahead of them, so at least
 * one zero byte follows the last record (see LogWriter). A crash mid-append leaves the start of a
 * record followed by those zeros: a torn tail. A file whose records run up to its very end, or past
 * it, was cut short after the fact, and acknowledged records may be gone with the cut: damage.
 *
 * Data format 1 (keyward 0.1.0 as first released, see src/store/format.ts) wrote segments without
 * that padding: each ended at its last record, and an empty one was an empty file. Read with
 * `padded: false`, a record cut off by the end of the file is a torn tail and no padding is asked
 * for; a cut at a record boundary cannot be seen there, which is why format 2 pads.
 */
import { readFile } from 'node:fs/promises'
import { isErrnoCode } from './fs-util'

export const LOG_HEADER_BYTES = 12

/** Largest payload a u32 length field can describe. */
const MAX_PAYLOAD_BYTES = 0xffff_ffff

export class LogDamageError extends Error {
  readonly file: string
  readonly offset: number

  constructor(file: string, offset: number, reason: string) {
    super(`${file}: damaged log record at offset ${offset}: ${reason}`)
    this.name = 'LogDamageError'
    this.file = file
    this.offset = offset
  }
}

export type LogScan = {
  /** Payloads of the good records, in order (views into the scanned bytes, not copies). */
  payloads: Uint8Array[]
  /** Offset just after the last good record: where appends continue. */
  validEnd: number
  /** An incomplete last write left by a crash (`bytes` of it are not zero), or null if there is none. */
  tornTail: null | { offset: number; bytes: number }
}

/**
 * The length a payload will have in its record, checked: what `encodeRecordInto` writes after the
 * header. Thrown here, in the append, so that a payload no record may hold fails alone.
 */
export function payloadBytes(payload: Uint8Array | string): number {
  const text = typeof payload === 'string'
  const length = text ? Buffer.byteLength(payload) : payload.length
  // Length 0 is reserved as invalid so a zeroed header can never look like a record.
  if (length === 0) throw new RangeError('log record payload must not be empty')
  // A complete record never ends in a zero byte (JSON never does), so one that does was torn. (Only
  // U+0000 ends in a zero byte in UTF-8.)
  if ((text ? payload.charCodeAt(payload.length - 1) : payload[length - 1]) === 0) throw new RangeError('log record payload must not end with a zero byte')
  if (length > MAX_PAYLOAD_BYTES) throw new RangeError('log record payload too large')
  return length
}

/**
 * Frames one payload (of `payloadBytes(payload)` bytes) as a record at `offset` of `target`, and
 * returns where the record ends. Text (a transaction's JSON) is encoded straight into place, and a
 * batch's records share one Buffer: no array per record, and no view of a small one (a view or the
 * `.buffer` of a small typed array costs JavaScriptCore an allocation; docs/storage.md "Embedded").
 */
export function encodeRecordInto(target: Buffer, offset: number, payload: Uint8Array | string, length: number): number {
  const start = offset + LOG_HEADER_BYTES
  if (typeof payload === 'string') target.write(payload, start, length, 'utf8')
  else target.set(payload, start)
  target.writeUInt32LE(length, offset)
  target.writeUInt32LE(Bun.hash.crc32(target.subarray(start, start + length)) >>> 0, offset + 4)
  target.writeUInt32LE(Bun.hash.crc32(target.subarray(offset, offset + 8)) >>> 0, offset + 8)
  return start + length
}

/** One payload framed as a record of its own. */
export function encodeRecord(payload: Uint8Array | string): Uint8Array {
  const length = payloadBytes(payload)
  const record = Buffer.allocUnsafe(LOG_HEADER_BYTES + length)
  encodeRecordInto(record, 0, payload, length)
  return record
}

/** Splits a log file's bytes into record payloads; throws LogDamageError on damage. */
export function scanLog(bytes: Uint8Array, file: string, { padded } = { padded: true }): LogScan {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const payloads: Uint8Array[] = []
  // Everything from `dataEnd` on is zero: the padding after the last record, or never written.
  let dataEnd = bytes.length
  while (dataEnd > 0 && bytes[dataEnd - 1] === 0) dataEnd--
  let offset = 0

  while (offset < dataEnd) {
    if (bytes.length - offset < LOG_HEADER_BYTES) {
      if (!padded) return tornAt(offset, dataEnd, payloads)
      throw new LogDamageError(file, offset, 'record cut off by the end of the file')
    }

    const length = view.getUint32(offset, true)
    const payloadCrc = view.getUint32(offset + 4, true)
    const headerCrc = view.getUint32(offset + 8, true)
    if (Bun.hash.crc32(bytes.subarray(offset, offset + 8)) !== headerCrc) {
      // Only the start of the header was written before a crash: zeros from inside it on.
      if (dataEnd < offset + LOG_HEADER_BYTES) return tornAt(offset, dataEnd, payloads)
      throw new LogDamageError(file, offset, 'header checksum mismatch')
    }
    // Never written by encodeRecord. (An all-zero header cannot get here: crc32 of 8 zero bytes
    // is not 0, so zeros are handled by the header check above.)
    if (length === 0) throw new LogDamageError(file, offset, 'zero payload length')

    const payloadStart = offset + LOG_HEADER_BYTES
    const payloadEnd = payloadStart + length
    // The header is intact and the writer always had room for the whole record: the file was cut.
    // (Without padding, the file simply ended where a crash stopped the append.)
    if (payloadEnd > bytes.length) {
      if (!padded) return tornAt(offset, dataEnd, payloads)
      throw new LogDamageError(file, offset, 'record cut off by the end of the file')
    }

    const payload = bytes.subarray(payloadStart, payloadEnd)
    if (Bun.hash.crc32(payload) !== payloadCrc) {
      // Only a payload whose end was never written (zeros from inside it on) counts as a tear; a
      // complete record with wrong contents is damage.
      if (dataEnd < payloadEnd) return tornAt(offset, dataEnd, payloads)
      throw new LogDamageError(file, offset, 'payload checksum mismatch')
    }

    payloads.push(payload)
    offset = payloadEnd
  }
  // The writer keeps at least one zero byte after the last record: none means the file was cut
  // short, maybe right after a record, and whatever followed is lost. (Covers an empty file too.)
  if (padded && offset >= bytes.length) throw new LogDamageError(file, offset, 'no padding after the last record: the file was cut short')
  return { payloads, validEnd: offset, tornTail: null }
}

/** Reads and scans a whole log file; a missing file is an empty log. */
export async function readLogFile(path: string, options = { padded: true }): Promise<LogScan> {
  let buffer: Buffer
  try {
    buffer = await readFile(path)
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return { payloads: [], validEnd: 0, tornTail: null }
    throw error
  }
  return scanLog(new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength), path, options)
}

/** Result for a scan that stopped at an incomplete record: its written bytes are [offset, dataEnd). */
function tornAt(offset: number, dataEnd: number, payloads: Uint8Array[]): LogScan {
  return { payloads, validEnd: offset, tornTail: { offset, bytes: dataEnd - offset } }
}
