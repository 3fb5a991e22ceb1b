/**
 * Damage on disk (docs/storage.md): a real data dir built by a real server (a
 * snapshot from a graceful stop, then a log from more writes and a SIGKILL), then each of its files
 * damaged in turn, in a copy of the dir:
 *
 *   (a) a torn tail, as a crash mid-append leaves it: start, with a warning, and nothing lost;
 *   (b) a flipped byte, (c) a truncation: refused (exit 1, a message naming the file and the
 *       offset) or started with every record exactly as acknowledged. Never silently changed.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { cpSync, readFileSync, readdirSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { killServers, startServer, stopServer, type ServerProcess } from '../support/server-process.ts'
import { dumpAll, type Dump } from '../support/sample-data.ts'
import { buildDamageTestDir, flip, logRecords as records, logSegmentNames } from '../support/damaged-dir.ts'
import { encodeRecord, LOG_HEADER_BYTES } from '../../src/store/log-format.ts'

setDefaultTimeout(30000)

const parent = tempDir('keyward-damage-')
const pristine = join(parent, 'pristine')
let token = ''
/** Every record as the API showed it once all writes were acknowledged. */
let acknowledged: Dump
let copies = 0

afterAll(async () => {
  await killServers() // those a failed test left running
  rmSync(parent, { recursive: true, force: true })
})

beforeAll(async () => {
  ;({ token, acknowledged } = await buildDamageTestDir(pristine))
})

/** A copy of the pristine data dir to damage. */
function copy(): string {
  const dir = join(parent, `copy-${++copies}`)
  cpSync(pristine, dir, { recursive: true })
  return dir
}

const wals = () => logSegmentNames(pristine)

async function startOrRefusal(dir: string): Promise<{ server: ServerProcess } | { refused: { code: number; stderr: string } }> {
  try {
    return { server: await startServer(dir) }
  } catch (error) {
    return { refused: { code: Number(/exited \((\d+)\)/.exec((error as Error).message)?.[1] ?? -1), stderr: (error as Error).message } }
  }
}

/**
 * Starts a server on the damaged dir. Either it refuses (exit 1, naming the file and an offset, and
 * nothing changed on disk), or it serves every record exactly as acknowledged.
 */
async function expectRefusedOrIntact(dir: string, file: string): Promise<'refused' | 'intact'> {
  const path = join(dir, file)
  const before = readFileSync(path)
  const outcome = await startOrRefusal(dir)
  if ('refused' in outcome) {
    expect(outcome.refused.code).toBe(1)
    expect(outcome.refused.stderr).toContain(path)
    expect(outcome.refused.stderr).toMatch(/offset \d+/)
    expect(readFileSync(path)).toEqual(before) // refused, not "repaired"
    return 'refused'
  }
  const { server } = outcome
  try {
    expect(await dumpAll(server.url, token)).toEqual(acknowledged)
  } finally {
    await stopServer(server, 'SIGKILL')
  }
  return 'intact'
}

/** A copy with one byte of `file` flipped. */
function flipped(file: string, at: number): string {
  const dir = copy()
  flip(join(dir, file), at)
  return dir
}

describe('the pristine dir', () => {
  test('has a snapshot and two log segments after it; starts with everything', async () => {
    expect(readdirSync(pristine).sort()).toEqual(['format', 'serve.lock', 'snapshot.json', ...wals()])
    expect(wals()).toHaveLength(2)
    for (const wal of wals()) expect(records(join(pristine, wal)).offsets.length).toBeGreaterThan(10)
    expect(await expectRefusedOrIntact(copy(), 'snapshot.json')).toBe('intact')
  })
})

describe('log segments', () => {
  test('newest segment, torn tail: a partial record after the last one is dropped with a warning', async () => {
    const segment = wals().at(-1)!
    const { end } = records(join(pristine, segment))
    const lsn = 1_000_000 // never acknowledged: no answer was ever given for it
    const record = encodeRecord(Buffer.from(JSON.stringify({ lsn, puts: [['consumers', { consumer_id: 'x' }]] })))
    for (const cut of [3, LOG_HEADER_BYTES, LOG_HEADER_BYTES + 10, record.length - 1]) {
      const dir = copy()
      const path = join(dir, segment)
      const bytes = readFileSync(path)
      bytes.set(record.subarray(0, cut), end) // where the crashed append was writing
      writeFileSync(path, bytes)
      const size = statSync(path).size
      const server = await startServer(dir)
      try {
        expect(server.stderr.text).toContain(`warning: ${path}: dropped an incomplete last record at offset ${end}`)
        expect(await dumpAll(server.url, token)).toEqual(acknowledged)
        expect(statSync(path).size).toBe(size)
      } finally {
        await stopServer(server, 'SIGKILL')
      }
    }
  })

  test('older segment, torn tail: refused (a crash can only tear the newest)', async () => {
    const segment = wals()[0]!
    const { end } = records(join(pristine, segment))
    const dir = copy()
    const path = join(dir, segment)
    const bytes = readFileSync(path)
    bytes.set(encodeRecord(Buffer.from('{"lsn":1000000,"puts":[]}')).subarray(0, 20), end)
    writeFileSync(path, bytes)
    expect(await expectRefusedOrIntact(dir, segment)).toBe('refused')
  })

  for (const name of ['older', 'newest'] as const) {
    const segment = () => (name === 'older' ? wals()[0]! : wals().at(-1)!)

    test(`${name} segment, a flipped byte anywhere in its records: refused, naming the file and the record`, async () => {
      const { offsets, end } = records(join(pristine, segment()))
      const positions = [0, offsets[1]! + 2, Math.floor(end / 2), offsets.at(-1)! + 5, offsets.at(-1)! + LOG_HEADER_BYTES + 3, end - 1]
      for (const at of positions) expect(await expectRefusedOrIntact(flipped(segment(), at), segment())).toBe('refused')
    })

    test(`${name} segment, a flipped byte in the zeros after its records: refused, or read as a torn byte`, async () => {
      const { end } = records(join(pristine, segment()))
      const size = statSync(join(pristine, segment())).size
      // Right after the last record, one byte is what a crash one byte into an append leaves: a
      // torn tail, dropped with a warning in the newest segment, damage in an older one.
      expect(await expectRefusedOrIntact(flipped(segment(), end), segment())).toBe(name === 'newest' ? 'intact' : 'refused')
      for (const at of [end + LOG_HEADER_BYTES, Math.floor((end + size) / 2), size - 1]) {
        expect(await expectRefusedOrIntact(flipped(segment(), at), segment())).toBe('refused')
      }
    })

    test(`${name} segment, truncated in the middle, inside a record or between two: refused; in the zeros after them: intact`, async () => {
      const { offsets, end } = records(join(pristine, segment()))
      const size = statSync(join(pristine, segment())).size
      for (const cut of [0, Math.floor(end / 2), offsets[Math.floor(offsets.length / 2)]!, offsets.at(-1)!, end - 1, end]) {
        const dir = copy()
        truncateSync(join(dir, segment()), cut)
        expect(await expectRefusedOrIntact(dir, segment())).toBe('refused')
      }
      for (const cut of [end + 1, Math.floor((end + size) / 2)]) {
        const dir = copy()
        truncateSync(join(dir, segment()), cut)
        expect(await expectRefusedOrIntact(dir, segment())).toBe('intact')
      }
    })
  }
})

describe('snapshot', () => {
  const path = () => join(pristine, 'snapshot.json')

  test('torn tail (bytes appended, or the end cut off): refused', async () => {
    const size = statSync(path()).size
    const appended = copy()
    writeFileSync(join(appended, 'snapshot.json'), Buffer.concat([readFileSync(path()), Buffer.from('{"organization_id":')]))
    expect(await expectRefusedOrIntact(appended, 'snapshot.json')).toBe('refused')
    const cut = copy()
    truncateSync(join(cut, 'snapshot.json'), size - 5)
    expect(await expectRefusedOrIntact(cut, 'snapshot.json')).toBe('refused')
  })

  test('a flipped byte anywhere: refused', async () => {
    const size = statSync(path()).size
    for (const at of [0, 30, Math.floor(size / 2), size - 40, size - 2]) {
      expect(await expectRefusedOrIntact(flipped('snapshot.json', at), 'snapshot.json')).toBe('refused')
    }
  })

  test('truncated in the middle: refused', async () => {
    const dir = copy()
    truncateSync(join(dir, 'snapshot.json'), Math.floor(statSync(path()).size / 2))
    expect(await expectRefusedOrIntact(dir, 'snapshot.json')).toBe('refused')
  })
})
