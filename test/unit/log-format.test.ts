import { describe, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs'
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

/** The encoded log and the start offset of each record. */
function buildLog(payloads: Uint8Array[]): { bytes: Uint8Array; offsets: number[] } {
  const records = payloads.map(encodeRecord)
  const offsets: number[] = []
  const bytes = new Uint8Array(records.reduce((n, r) => n + r.length, 0))
  let at = 0
  for (const record of records) {
    offsets.push(at)
    bytes.set(record, at)
    at += record.length
  }
  return { bytes, offsets }
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

  test('rejects an empty payload', () => {
    expect(() => encodeRecord(new Uint8Array(0))).toThrow(RangeError)
  })
})

describe('scanLog', () => {
  test('round-trips several records', () => {
    const { bytes } = buildLog(PAYLOADS)
    const scan = scanLog(bytes, 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS))
    expect(scan.validEnd).toBe(bytes.length)
    expect(scan.tornTail).toBeNull()
  })

  test('an empty file has no records', () => {
    expect(scanLog(new Uint8Array(0), 'wal.log')).toEqual({ payloads: [], validEnd: 0, tornTail: null })
  })

  test('works on a view that does not start at the buffer start', () => {
    const { bytes } = buildLog(PAYLOADS)
    const padded = new Uint8Array(bytes.length + 7)
    padded.set(bytes, 7)
    const scan = scanLog(padded.subarray(7), 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS))
  })

  test('a cut inside the last header is a torn tail', () => {
    const { bytes, offsets } = buildLog(PAYLOADS)
    const last = offsets[2]!
    const scan = scanLog(bytes.subarray(0, last + 5), 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
    expect(scan.validEnd).toBe(last)
    expect(scan.tornTail).toEqual({ offset: last, bytes: 5 })
  })

  test('a cut inside the last payload is a torn tail', () => {
    const { bytes, offsets } = buildLog(PAYLOADS)
    const last = offsets[2]!
    const cut = bytes.length - 3
    const scan = scanLog(bytes.subarray(0, cut), 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
    expect(scan.validEnd).toBe(last)
    expect(scan.tornTail).toEqual({ offset: last, bytes: cut - last })
  })

  test('a zero-filled tail after the good records is a torn tail', () => {
    const { bytes } = buildLog(PAYLOADS)
    const withZeros = new Uint8Array(bytes.length + 4096)
    withZeros.set(bytes)
    const scan = scanLog(withZeros, 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS))
    expect(scan.validEnd).toBe(bytes.length)
    expect(scan.tornTail).toEqual({ offset: bytes.length, bytes: 4096 })
  })

  test('a written header with a zero-filled payload at the end is a torn tail', () => {
    const { bytes, offsets } = buildLog(PAYLOADS)
    const last = offsets[2]!
    const zeroed = bytes.slice()
    zeroed.fill(0, last + LOG_HEADER_BYTES)
    const scan = scanLog(zeroed, 'wal.log')
    expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
    expect(scan.validEnd).toBe(last)
    expect(scan.tornTail).toEqual({ offset: last, bytes: bytes.length - last })
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
    const { bytes, offsets } = buildLog(PAYLOADS)
    expectDamage(flipByte(bytes, bytes.length - 1), offsets[2]!)
  })

  test('garbage after the good records is damage', () => {
    const { bytes } = buildLog(PAYLOADS)
    const withGarbage = new Uint8Array(bytes.length + 20)
    withGarbage.set(bytes)
    withGarbage[bytes.length + 15] = 0xaa
    expectDamage(withGarbage, bytes.length)
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
  test('readLogFile reads a log, treats a missing file as empty, and validEnd is where to cut a tear', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keyward-log-'))
    try {
      const path = join(dir, 'wal.log')
      expect(await readLogFile(path)).toEqual({ payloads: [], validEnd: 0, tornTail: null })

      const { bytes } = buildLog(PAYLOADS)
      writeFileSync(path, bytes.subarray(0, bytes.length - 2))
      const scan = await readLogFile(path)
      expect(decoded(scan.payloads)).toEqual(decoded(PAYLOADS.slice(0, 2)))
      expect(scan.tornTail).not.toBeNull()

      truncateSync(path, scan.validEnd)
      expect(readFileSync(path).length).toBe(scan.validEnd)
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
