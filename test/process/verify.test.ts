/**
 * `keyward verify` (docs/operations.md) on a real data dir (the damage test's: a snapshot, two log
 * segments): intact, a summary and exit 0, also beside a server writing to it; each file
 * damaged in turn, exit 1 naming that file and the offset of the first damage, and nothing changed.
 */
import { afterAll, afterEach, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { api, keywardCommand, killServers, run, startServer, stopServer } from '../support/server-process.ts'
import { buildDamageTestDir, flip, logRecords, logSegmentNames } from '../support/damaged-dir.ts'
import { encodeRecord, LOG_HEADER_BYTES, scanLog } from '../../src/store/log-format.ts'
import { readSnapshot } from '../../src/store/snapshot-file.ts'
import { DATA_FORMAT } from '../../src/store/format.ts'
import { Store } from '../../src/store/store.ts'

setDefaultTimeout(30000)

const parent = tempDir('keyward-verify-')
const pristine = join(parent, 'pristine')
let token = ''
let vendorId = ''
/** Records per table as the API showed them. */
let counts: Record<string, number> = {}
let copies = 0

beforeAll(async () => {
  const built = await buildDamageTestDir(pristine)
  ;({ token, vendorId } = built)
  const keys = Object.keys(built.acknowledged)
  const count = (kind: string) => keys.filter((key) => new RegExp(`^${kind} [0-9a-f-]{36}$`).test(key)).length
  counts = {
    organizations: count('organization'),
    applications: count('application'),
    consumers: count('consumer'),
    installations: count('installation'),
    enrollments: count('enrollment'),
    keysets: Object.entries(built.acknowledged).filter(([key]) => key.startsWith('keysets ')).reduce((n, [, sets]) => n + (sets as unknown[]).length, 0),
    tokens: count('token'),
    audit_events: count('audit event'),
  }
})
afterEach(() => killServers())
afterAll(() => rmSync(parent, { recursive: true, force: true }))

const verify = (dir: string) => run(keywardCommand(['verify', '--data', dir]))

function copy(): string {
  const dir = join(parent, `copy-${++copies}`)
  cpSync(pristine, dir, { recursive: true })
  return dir
}

const contents = (dir: string) => readdirSync(dir).map((name) => [name, readFileSync(join(dir, name))])

/** The LSN of the last record in a log file. */
function lastLsn(path: string): number {
  const { payloads } = scanLog(readFileSync(path), path)
  return JSON.parse(Buffer.from(payloads.at(-1)!).toString()).lsn
}

describe('an intact data dir', () => {
  test('exit 0 and a summary: data format, log position, records per table, the vendor organization; nothing changed', async () => {
    const dir = copy()
    const before = contents(dir)
    const result = await verify(dir)
    expect(result).toMatchObject({ code: 0, stderr: '' })
    const snapshotLsn = (await readSnapshot(join(dir, 'snapshot.json')))!.lsn
    const position = lastLsn(join(dir, logSegmentNames(dir).at(-1)!))
    const records = Object.entries(counts).map(([table, n]) => `${table} ${n}`).join(', ')
    expect(result.stdout).toBe(
      `keyward: data dir ${dir} is intact\n` +
        `data format: ${DATA_FORMAT}\n` +
        `log position: ${position} (snapshot at ${snapshotLsn}, then ${position - snapshotLsn} log records)\n` +
        `records: ${records}\n` +
        `vendor organization: ${vendorId}\n`,
    )
    expect(contents(dir)).toEqual(before)
  })

  test('beside a server writing to it (no lock taken): exit 0, and the server goes on', async () => {
    const dir = copy()
    const server = await startServer(dir)
    try {
      let writing = true
      const writes = (async () => {
        while (writing) {
          const res = await api(server.url, token, 'POST', '/api/organizations', { description: 'more', parent_id: vendorId })
          expect(res.status).toBe(201)
        }
      })()
      const results = [await verify(dir), await verify(dir)]
      writing = false
      await writes
      for (const result of results) expect(result).toMatchObject({ code: 0, stderr: '' })
      expect((await api(server.url, token, 'POST', '/api/organizations', { description: 'after', parent_id: vendorId })).status).toBe(201)
    } finally {
      expect(await stopServer(server, 'SIGTERM')).toBe(0)
    }
  })

  test('a torn last record (a write in progress, or cut off by a crash): intact, with a note naming it', async () => {
    const dir = copy()
    const segment = join(dir, logSegmentNames(dir).at(-1)!)
    const { end } = logRecords(segment)
    const bytes = readFileSync(segment)
    bytes.set(encodeRecord(Buffer.from('{"lsn":1000000,"puts":[]}')).subarray(0, 20), end)
    writeFileSync(segment, bytes)
    const result = await verify(dir)
    expect(result.code).toBe(0)
    expect(result.stdout).toContain(`note: ${segment}: an incomplete last record at offset ${end} (20 bytes)`)
    expect(readFileSync(segment)).toEqual(bytes) // not repaired: verify writes nothing
  })
})

describe('a damaged data dir: exit 1 naming the file and the offset of the first damage', () => {
  /** Damages a copy with `damage`, then expects verify to name `file` and `offset`, and to change nothing. */
  async function expectDamage(damage: (dir: string) => void, file: string, offset: number): Promise<string> {
    const dir = copy()
    damage(dir)
    const before = contents(dir)
    const result = await verify(dir)
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toStartWith(`keyward: data dir ${dir} is damaged: ${join(dir, file)}: damaged`)
    expect(result.stderr).toContain(` at offset ${offset}: `)
    expect(contents(dir)).toEqual(before)
    return result.stderr
  }
  const older = () => logSegmentNames(pristine)[0]!
  const newest = () => logSegmentNames(pristine).at(-1)!
  const offsetsIn = (segment: string) => logRecords(join(pristine, segment)).offsets

  test('format', async () => {
    await expectDamage((dir) => writeFileSync(join(dir, 'format'), '2x\n'), 'format', 0)
  })

  test('the snapshot: the checksummed block holding the damage', async () => {
    const size = readFileSync(join(pristine, 'snapshot.json')).length
    const stderr = await expectDamage((dir) => flip(join(dir, 'snapshot.json'), Math.floor(size / 2)), 'snapshot.json', 0)
    expect(stderr).toContain('block checksum mismatch')
  })

  test("the snapshot's encoded audit events: a changed byte is its block; a line cut short with its checksums redone is damage at that line", async () => {
    const text = readFileSync(join(pristine, 'snapshot.json'), 'utf8')
    const line = text.indexOf('\n["events",') + 1
    expect(line).toBeGreaterThan(0)
    const flipped = await expectDamage((dir) => flip(join(dir, 'snapshot.json'), line + 30), 'snapshot.json', 0)
    expect(flipped).toContain('block checksum mismatch')
    // Four base64 characters (three bytes) fewer, and a trailer that vouches for the result: only
    // the check of the events themselves can tell.
    const body = text.slice(0, text.indexOf('\n"integrity":') + 1)
    const lineEnd = body.indexOf('\n', line)
    const closing = body.lastIndexOf('"]', lineEnd)
    const cut = Buffer.from(body.slice(0, closing - 4) + body.slice(closing))
    const trailer = `"integrity":{"algorithm":"crc32","blocks":[[0,${cut.length},${Bun.hash.crc32(cut)}]]}}\n`
    const stderr = await expectDamage((dir) => writeFileSync(join(dir, 'snapshot.json'), Buffer.concat([cut, Buffer.from(trailer)])), 'snapshot.json', Buffer.byteLength(text.slice(0, line)))
    expect(stderr).toContain('is not a whole, valid event')
  })

  test('a log segment, in a payload or in a header: the record holding it', async () => {
    for (const segment of [older(), newest()]) {
      const offsets = offsetsIn(segment)
      await expectDamage((dir) => flip(join(dir, segment), offsets[3]! + LOG_HEADER_BYTES + 5), segment, offsets[3]!)
      await expectDamage((dir) => flip(join(dir, segment), offsets[2]! + 1), segment, offsets[2]!)
    }
  })

  test('a `secret` of a version with signed tokens is not read: cut short, the dir is still intact', async () => {
    const dir = copy()
    writeFileSync(join(dir, 'secret'), 'ab'.repeat(20), { mode: 0o600 })
    expect(await verify(dir)).toMatchObject({ code: 0, stdout: expect.stringContaining('is intact') })
  })

  test('the first damage of several: the earlier record, the older segment', async () => {
    const offsets = offsetsIn(older())
    await expectDamage(
      (dir) => {
        flip(join(dir, older()), offsets[6]! + LOG_HEADER_BYTES)
        flip(join(dir, older()), offsets[2]! + LOG_HEADER_BYTES)
        flip(join(dir, newest()), offsetsIn(newest())[1]! + LOG_HEADER_BYTES)
      },
      older(),
      offsets[2]!,
    )
  })

  test('a dir that is not initialised or not there is exit 1 too', async () => {
    const empty = join(parent, 'empty')
    mkdirSync(empty)
    expect(await verify(empty)).toMatchObject({ code: 1, stderr: expect.stringContaining('not initialised') })
    expect(await verify(join(parent, 'absent'))).toMatchObject({ code: 1, stderr: expect.stringContaining('does not exist') })
    // keyward's files (format, log, snapshot) but no vendor: opened and closed by a start that stopped before `init`.
    const opened = join(parent, 'opened')
    await (await Store.open(opened, { log: () => {} })).close()
    expect(readdirSync(opened).length).toBeGreaterThan(1)
    expect(await verify(opened)).toMatchObject({ code: 1, stderr: expect.stringContaining(`data dir ${opened} holds no keyward data: it is not initialised`) })
  })

  test('a newer data format: exit 1 naming both versions', async () => {
    const dir = copy()
    writeFileSync(join(dir, 'format'), `${DATA_FORMAT + 1}\n`)
    const result = await verify(dir)
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`data format ${DATA_FORMAT + 1}, newer than keyward`)
  })
})
