import { describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  encodeRecord,
  LOG_HEADER_BYTES,
  LogDamageError,
  readLogFile,
  scanLog,
} from '../../src/store/log-format.ts'

const text = new TextEncoder()
const PAYLOADS = ['first', 'second record', '{"op":"put","id":3}'].map((s) => text.encode(s))

/** Zeros the writer keeps after the records (any number of at least one will do). */
const PADDING = 64

/** The encoded log with its padding, the start offset of each record, and where the records end. */
function buildLog(payloads: Uint8Array[]): { bytes: Uint8Array; offsets: number[]; end: number } {
  const records = payloads.map(encodeRecord)
  const offsets: number[] = []
  const end = records.reduce((n, r) => n + r.length, 0)
  const bytes = new Uint8Array(end + PADDING)
  let at = 0
  for (const record of records) {
    offsets.push(at)
    bytes.set(record, at)
    at += record.length
  }
  return { bytes, offsets, end }
}

/** The first `cut` bytes of `bytes`, the rest zeros: what a crash part way through writing leaves. */
function zerosFrom(bytes: Uint8Array, cut: number): Uint8Array {
  const copy = bytes.slice()
  copy.fill(0, cut)
  return copy
}

function decoded(payloads: Uint8Array[]): string[] {
  return payloads.map((p) => new TextDecoder().decode(p))
}

function flipByte(bytes: Uint8Array, at: number): Uint8Array {
  const copy = bytes.slice()
  copy[at] = (copy[at] ?? 0) ^ 0x01
  return copy
}

function expectDamage(bytes: Uint8Array, offset: number): void {
  let caught: unknown
  try {
    scanLog(bytes, 'wal.log')
  } catch (error) {
    caught = error
  }
  expect(caught).toBeInstanceOf(LogDamageError)
  const damage = caught as LogDamageError
  expect(damage.offset).toBe(offset)
  expect(damage.file).toBe('wal.log')
  expect(damage.message).toStartWith(`wal.log: damaged log record at offset ${offset}: `)
}

describe('encodeRecord', () => {
  test('writes length, payload crc and header crc little-endian', () => {
    const payload = text.encode('hello')
    const record = encodeRecord(payload)
    const view = new DataView(record.buffer)
    expect(record.length).toBe(LOG_HEADER_BYTES + 5)
    expect(view.getUint32(0, true)).toBe(5)
    expect(view.getUint32(4, true)).toBe(Bun.hash.crc32(payload))
    expect(view.getUint32(8, true)).toBe(Bun.hash.crc32(record.subarray(0, 8)))
    expect(record.subarray(LOG_HEADER_BYTES)).toEqual(payload)
  })

  test('frames text as the record of its UTF-8 bytes', () => {
    for (const payload of ['{"lsn":1}', '{"d":"Zürich 東京 🔑"}', 'x'.repeat(70_000)]) {
      expect(encodeRecord(payload)).toEqual(encodeRecord(text.encode(payload)))
    }
  })

  test('rejects an empty payload', () => {
    expect(() => encodeRecord(new Uint8Array(0))).toThrow(RangeError)
    expect(() => encodeRecord('')).toThrow(RangeError)
  })

  test('rejects a payload ending in a zero byte (a torn record ends in zeros)', () => {
    expect(() => encodeRecord(new Uint8Array([1, 0]))).toThrow(RangeError)
    expect(() => encodeRecord('{}\u0000')).toThrow(RangeError)
  })
})

describe('scanLog', () => {
  test('round-trips several records; the zeros after them are padding, not a tear', () => {
    const { bytes, end } = buildLog(PAYLOADS)
    const scan = scanLog(bytes, 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS))
    expect(scan.validEnd).toBe(end)
    expect(scan.tornTail).toBeNull()
  })

  test('a file of zeros has no records', () => {
    expect(scanLog(new Uint8Array(100), 'wal.log')).toEqual({ payloads: [], validEnd: 0, tornTail: null })
  })

  test('an empty file is damage: a segment is never created without its padding', () => {
    expectDamage(new Uint8Array(0), 0)
  })

  test('records that run up to the end of the file are damage: it was cut short, maybe by whole records', () => {
    const { bytes, offsets, end } = buildLog(PAYLOADS)
    expectDamage(bytes.subarray(0, end), end)
    expectDamage(bytes.subarray(0, offsets[2]!), offsets[2]!)
  })

  test('a record cut off by the end of the file is damage, not a torn tail', () => {
    const { bytes, offsets, end } = buildLog(PAYLOADS)
    expectDamage(bytes.subarray(0, end - 3), offsets[2]!) // inside the payload
    expectDamage(bytes.subarray(0, offsets[2]! + 5), offsets[2]!) // inside the header
  })

  test('any start of an append followed by zeros is a torn tail, never damage', () => {
    // One batch of several records written after the first: a crash stops it at any byte (and the
    // writer zeroing a failed batch back to front stops at any page), the rest stays zero.
    const { bytes, offsets, end } = buildLog(PAYLOADS)
    for (let cut = offsets[1]!; cut <= end; cut++) {
      const scan = scanLog(zerosFrom(bytes, cut), 'wal.log')
      const whole = offsets.filter((o, i) => (offsets[i + 1] ?? end) <= cut).length
      expect([cut, scan.payloads.length]).toEqual([cut, whole])
      const next = offsets[whole] ?? end
      expect([cut, scan.tornTail === null]).toEqual([cut, cut === next])
    }
  })

  test('works on a view that does not start at the buffer start', () => {
    const { bytes } = buildLog(PAYLOADS)
    const padded = new Uint8Array(bytes.length + 7)
    padded.set(bytes, 7)
    const scan = scanLog(padded.subarray(7), 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS))
  })

  test('the last record written up to inside its header, zeros after: a torn tail', () => {
    const { bytes, offsets } = buildLog(PAYLOADS)
    const last = offsets[2]!
    const scan = scanLog(zerosFrom(bytes, last + 5), 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
    expect(scan.validEnd).toBe(last)
    expect(scan.tornTail?.offset).toBe(last)
  })

  test('the last record written up to inside its payload, zeros after: a torn tail', () => {
    const { bytes, offsets, end } = buildLog(PAYLOADS)
    const last = offsets[2]!
    const scan = scanLog(zerosFrom(bytes, end - 3), 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
    expect(scan.validEnd).toBe(last)
    expect(scan.tornTail).toEqual({ offset: last, bytes: end - 3 - last })
  })

  test('a written header with a zero-filled payload at the end is a torn tail', () => {
    const { bytes, offsets } = buildLog(PAYLOADS)
    const last = offsets[2]!
    const scan = scanLog(zerosFrom(bytes, last + LOG_HEADER_BYTES), 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
    expect(scan.validEnd).toBe(last)
    expect(scan.tornTail?.offset).toBe(last)
  })

  test('a flipped byte in a middle payload is damage at that record', () => {
    const { bytes, offsets } = buildLog(PAYLOADS)
    expectDamage(flipByte(bytes, offsets[1]! + LOG_HEADER_BYTES + 2), offsets[1]!)
  })

  test('a flipped byte in a middle length field is damage, not a torn tail', () => {
    const { bytes, offsets } = buildLog(PAYLOADS)
    // Growing the length would otherwise make the record appear to run past EOF.
    const damaged = bytes.slice()
    damaged[offsets[1]! + 2] = 0x7f
    expectDamage(damaged, offsets[1]!)
    expectDamage(flipByte(bytes, offsets[1]!), offsets[1]!)
  })

  test('a flipped byte in the last complete payload is damage, not a torn tail', () => {
    const { bytes, offsets, end } = buildLog(PAYLOADS)
    expectDamage(flipByte(bytes, end - 1), offsets[2]!)
    expectDamage(flipByte(bytes, offsets[2]! + LOG_HEADER_BYTES), offsets[2]!)
    expectDamage(flipByte(bytes, offsets[2]! + 9), offsets[2]!) // its header checksum
  })

  test('garbage after the good records is damage', () => {
    const { bytes, end } = buildLog(PAYLOADS)
    const withGarbage = bytes.slice()
    withGarbage[end + 15] = 0xaa
    expectDamage(withGarbage, end)
  })

  test('a zero length with a valid header checksum is damage', () => {
    const { bytes, offsets } = buildLog(PAYLOADS)
    const damaged = bytes.slice()
    const view = new DataView(damaged.buffer)
    const at = offsets[1]!
    view.setUint32(at, 0, true)
    view.setUint32(at + 8, Bun.hash.crc32(damaged.subarray(at, at + 8)), true)
    expectDamage(damaged, at)
  })
})

describe('log files', () => {
  test('readLogFile reads a log, treats a missing file as empty, and a tear zeroed from validEnd is gone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyward-log-'))
    try {
      const path = join(dir, 'wal.log')
      expect(await readLogFile(path)).toEqual({ payloads: [], validEnd: 0, tornTail: null })

      const { bytes, end } = buildLog(PAYLOADS)
      writeFileSync(path, zerosFrom(bytes, end - 2))
      const scan = await readLogFile(path)
      expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
      expect(scan.tornTail).not.toBeNull()

      writeFileSync(path, zerosFrom(readFileSync(path), scan.validEnd))
      const again = await readLogFile(path)
      expect(again.tornTail).toBeNull()
      expect(decoded(again.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('readLogFile reports damage with the file path', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyward-log-'))
    try {
      const path = join(dir, 'wal.log')
      const { bytes, offsets } = buildLog(PAYLOADS)
      writeFileSync(path, flipByte(bytes, offsets[1]! + LOG_HEADER_BYTES))
      const error = await readLogFile(path).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(LogDamageError)
      expect((error as LogDamageError).file).toBe(path)
      expect((error as LogDamageError).offset).toBe(offsets[1]!)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
