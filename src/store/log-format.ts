/**
 * WAL record framing. Each record is, little-endian:
 *
 *   [u32 payloadLength][u32 crc32(payload)][u32 crc32(first 8 header bytes)][payload]
 *
 * The header has its own checksum so that a flipped bit in a length field in the middle of the
 * file is reported as damage instead of being mistaken for a torn tail (which would silently drop
 * every later record).
 */
import { readFile } from 'node:fs/promises'

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
  /** Offset just after the last good record: the caller truncates the file here after a tear. */
  validEnd: number
  /** An incomplete last write left by a crash, or null if the file ends cleanly. */
  tornTail: null | { offset: number; bytes: number }
}

export function encodeRecord(payload: Uint8Array): Uint8Array {
  // Length 0 is reserved as invalid so a zeroed header can never look like a record.
  if (payload.length === 0) throw new RangeError('log record payload must not be empty')
  if (payload.length > MAX_PAYLOAD_BYTES) throw new RangeError('log record payload too large')
  const record = new Uint8Array(LOG_HEADER_BYTES + payload.length)
  const view = new DataView(record.buffer)
  view.setUint32(0, payload.length, true)
  view.setUint32(4, Bun.hash.crc32(payload), true)
  view.setUint32(8, Bun.hash.crc32(record.subarray(0, 8)), true)
  record.set(payload, LOG_HEADER_BYTES)
  return record
}

/** Splits a log file's bytes into record payloads; throws LogDamageError on damage. */
export function scanLog(bytes: Uint8Array, file: string): LogScan {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const payloads: Uint8Array[] = []
  let offset = 0

  while (offset < bytes.length) {
    if (bytes.length - offset < LOG_HEADER_BYTES) return tornAt(offset, bytes, payloads)

    const length = view.getUint32(offset, true)
    const payloadCrc = view.getUint32(offset + 4, true)
    const headerCrc = view.getUint32(offset + 8, true)
    if (Bun.hash.crc32(bytes.subarray(offset, offset + 8)) !== headerCrc) {
      // A crash can leave the file extended with zeros that were never written.
      if (isAllZero(bytes, offset)) return tornAt(offset, bytes, payloads)
      throw new LogDamageError(file, offset, 'header checksum mismatch')
    }
    // Never written by encodeRecord. (An all-zero header cannot get here: crc32 of 8 zero bytes
    // is not 0, so zeroed tails are handled by the header check above.)
    if (length === 0) throw new LogDamageError(file, offset, 'zero payload length')

    const payloadStart = offset + LOG_HEADER_BYTES
    const payloadEnd = payloadStart + length
    // The header is intact, so a payload running past EOF is an interrupted append.
    if (payloadEnd > bytes.length) return tornAt(offset, bytes, payloads)

    const payload = bytes.subarray(payloadStart, payloadEnd)
    if (Bun.hash.crc32(payload) !== payloadCrc) {
      // Only a never-written (zeroed) payload with nothing but zeros after it counts as a tear;
      // a complete record with wrong contents is damage.
      if (isAllZero(bytes, payloadStart)) return tornAt(offset, bytes, payloads)
      throw new LogDamageError(file, offset, 'payload checksum mismatch')
    }

    payloads.push(payload)
    offset = payloadEnd
  }
  return { payloads, validEnd: offset, tornTail: null }
}

/** Reads and scans a whole log file; a missing file is an empty log. */
export async function readLogFile(path: string): Promise<LogScan> {
  let buffer: Buffer
  try {
    buffer = await readFile(path)
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return { payloads: [], validEnd: 0, tornTail: null }
    throw error
  }
  return scanLog(new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength), path)
}

/** Result for a scan that stopped at an incomplete record starting at `offset`. */
function tornAt(offset: number, bytes: Uint8Array, payloads: Uint8Array[]): LogScan {
  return { payloads, validEnd: offset, tornTail: { offset, bytes: bytes.length - offset } }
}

function isAllZero(bytes: Uint8Array, from: number): boolean {
  for (let i = from; i < bytes.length; i++) {
    if (bytes[i] !== 0) return false
  }
  return true
}

function isErrnoCode(error: unknown, code: string): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === code
}
