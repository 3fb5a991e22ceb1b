/**
 * A real data dir to damage (test/process/damage.test.ts, verify.test.ts), and the tools to damage it:
 * where its log records start, a flipped byte.
 */
import { expect } from 'bun:test'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { initLine, startServer, stopServer } from './server-process'
import { dumpAll, writeRecords, type Dump } from './sample-data'
import { LOG_HEADER_BYTES, scanLog } from '../../src/store/log-format'

export interface DamageTestDir {
  readonly token: string
  readonly vendorId: string
  /** Every record as the API showed it once all writes were acknowledged. */
  readonly acknowledged: Dump
}

/**
 * Built by a real server in `dir`: a snapshot from a graceful stop, then two log segments after it
 * (a graceful stop whose snapshot could not be written leaves the segment before its rotation), the
 * newest ended by SIGKILL.
 */
export async function buildDamageTestDir(dir: string): Promise<DamageTestDir> {
  const first = await startServer(dir)
  const { organization_id: vendorId, token } = initLine(first)
  await writeRecords(first.url, token, vendorId, 1)
  expect(await stopServer(first, 'SIGTERM')).toBe(0) // a snapshot
  // A graceful stop whose snapshot cannot be written (a directory in the way of its temp file):
  // the log was rotated, and the segment before the rotation stays.
  const second = await startServer(dir)
  await writeRecords(second.url, token, vendorId, 2)
  mkdirSync(join(dir, 'snapshot.json.tmp', 'in-the-way'), { recursive: true })
  expect(await stopServer(second, 'SIGTERM')).toBe(1)
  rmSync(join(dir, 'snapshot.json.tmp'), { recursive: true })
  const third = await startServer(dir)
  await writeRecords(third.url, token, vendorId, 3) // the newest segment
  const acknowledged = await dumpAll(third.url, token)
  expect(await stopServer(third, 'SIGKILL')).toBe(-9)
  rmSync(join(dir, 'control.sock')) // left by the kill; a socket is no file to copy or check
  return { token, vendorId, acknowledged }
}

/** The log segment files of a dir, oldest first. */
export const logSegmentNames = (dir: string) => readdirSync(dir).filter((n) => /^wal-\d{16}\.log$/.test(n)).sort()

/** Record start offsets in a log file, and where its records end. */
export function logRecords(path: string): { offsets: number[]; end: number } {
  const scan = scanLog(readFileSync(path), path)
  const offsets: number[] = []
  let at = 0
  for (const payload of scan.payloads) {
    offsets.push(at)
    at += LOG_HEADER_BYTES + payload.length
  }
  return { offsets, end: scan.validEnd }
}

/** Flips bits of the byte at `at`: never into the same byte, nor into a zero from JSON or hex text. */
export function flip(path: string, at: number): void {
  const bytes = readFileSync(path)
  bytes[at] = bytes[at]! ^ 0x5a
  writeFileSync(path, bytes)
}
