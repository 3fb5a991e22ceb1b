import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Low } from 'lowdb'
import { JSONFile } from 'lowdb/node'
import {
  readSnapshot,
  scanSnapshot,
  SnapshotDamageError,
  SnapshotLineError,
  type SnapshotData,
  SnapshotFile,
  writeSnapshot,
} from '../../src/store/snapshot-file.ts'

type Org = { id: string; name: string; active: boolean; parent: null; tags: { n: number } }

let dir: string
let path: string

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'keyward-snapshot-'))
  path = join(dir, 'snapshot.json')
})

afterEach(() => {
  rmSync(dir, { recursive: true, force: true })
})

function org(i: number): Org {
  return { id: `org-${i}`, name: `Org "${i}"\nline two ✓`, active: i % 2 === 0, parent: null, tags: { n: i } }
}

/** ~3.5 MiB of records, enough for several 1 MiB blocks. */
function bigSnapshot(): SnapshotData {
  const padding = 'x'.repeat(100)
  const records = Array.from({ length: 30_000 }, (_, i) => ({ id: i, padding }))
  return { format: 1, lsn: 7, meta: {}, tables: { records } }
}

function blocksOf(file: string): [number, number, number][] {
  const doc = JSON.parse(readFileSync(file, 'utf8')) as { integrity: { blocks: [number, number, number][] } }
  return doc.integrity.blocks
}

async function readError(file: string): Promise<SnapshotDamageError> {
  const error = await readSnapshot(file).catch((e: unknown) => e)
  expect(error).toBeInstanceOf(SnapshotDamageError)
  return error as SnapshotDamageError
}

describe('SnapshotFile', () => {
  test('round-trips through lowdb', async () => {
    const orgs = [org(1), org(2)]
    const db = new Low(new SnapshotFile(path), null)
    db.data = { format: 1, lsn: 42, meta: { nextId: 3, note: 'ü' }, tables: { organizations: orgs, applications: [] } }
    await db.write()

    const again = new Low(new SnapshotFile(path), null)
    await again.read()
    expect(again.data).toEqual({
      format: 1,
      lsn: 42,
      meta: { nextId: 3, note: 'ü' },
      tables: { organizations: orgs, applications: [] },
    })
  })

  test('reads a missing file as null', async () => {
    const db = new Low(new SnapshotFile(path), null)
    await db.read()
    expect(db.data).toBeNull()
    expect(await readSnapshot(path)).toBeNull()
  })

  test('writes valid JSON with one record per line', async () => {
    const orgs = new Map([1, 2, 3].map((i) => [i, org(i)]))
    await writeSnapshot(path, { format: 1, lsn: 5, meta: { a: 1 }, tables: { organizations: orgs.values(), empty: [] } })
    const text = readFileSync(path, 'utf8')

    const doc = JSON.parse(text)
    expect(doc.lsn).toBe(5)
    expect(doc.tables.organizations).toEqual([org(1), org(2), org(3)])
    expect(doc.integrity.algorithm).toBe('crc32')
    expect(await new JSONFile(path).read()).toEqual(doc) // lowdb's own adapter can read it

    const lines = text.split('\n')
    expect(lines).toContain(`${JSON.stringify(org(2))},`)
    expect(lines).toContain(JSON.stringify(org(3)))
  })

  test('writes the file with mode 0600 and leaves no temp file', async () => {
    await writeSnapshot(path, bigSnapshot())
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(readdirSync(dir)).toEqual(['snapshot.json'])
  })

  test('large snapshots are split into contiguous line-aligned blocks', async () => {
    await writeSnapshot(path, bigSnapshot())
    const bytes = readFileSync(path)
    const blocks = blocksOf(path)
    expect(blocks.length).toBeGreaterThan(2)
    let expectedStart = 0
    for (const [start, end] of blocks) {
      expect(start).toBe(expectedStart)
      expect(bytes[end - 1]).toBe(0x0a) // ends at a line end
      expectedStart = end
    }
    expect(bytes.subarray(expectedStart).toString()).toStartWith('"integrity":')
    expect((await readSnapshot(path))?.tables.records).toHaveLength(30_000)
  })

  test('a flipped byte in the second block is reported at that block', async () => {
    await writeSnapshot(path, bigSnapshot())
    const bytes = readFileSync(path)
    const second = blocksOf(path)[1]!
    // Swap one padding letter: the JSON stays valid, only the checksum can catch it.
    const at = bytes.indexOf('x', second[0] + 1000)
    expect(at).toBeLessThan(second[1])
    bytes[at] = 'y'.charCodeAt(0)
    writeFileSync(path, bytes)
    expect(() => JSON.parse(bytes.toString())).not.toThrow()

    const error = await readError(path)
    expect(error.offset).toBe(second[0])
    expect(error.file).toBe(path)
    expect(error.message).toBe(`${path}: damaged snapshot at offset ${second[0]}: block checksum mismatch`)
  })

  test('a file truncated in the middle is damage at its end', async () => {
    await writeSnapshot(path, bigSnapshot())
    const cut = Math.floor(statSync(path).size / 2)
    truncateSync(path, cut)
    const error = await readError(path)
    expect(error.offset).toBe(cut)
  })

  test('a file truncated inside the integrity line is damage at that line', async () => {
    await writeSnapshot(path, bigSnapshot())
    const size = statSync(path).size
    const blocks = blocksOf(path)
    truncateSync(path, size - 3)
    const error = await readError(path)
    expect(error.offset).toBe(blocks.at(-1)![1])
  })

  test('an empty file is damage', async () => {
    writeFileSync(path, '')
    expect((await readError(path)).offset).toBe(0)
  })

  test('invalid JSON inside verified blocks is reported as damage, not a SyntaxError', async () => {
    const body = Buffer.from('{"format":1,\nnot json\n')
    const trailer = `"integrity":{"algorithm":"crc32","blocks":[[0,${body.length},${Bun.hash.crc32(body)}]]}}\n`
    writeFileSync(path, Buffer.concat([body, Buffer.from(trailer)]))
    const error = await readError(path)
    expect(error.offset).toBe(0)
    expect(error.message).toContain('invalid JSON')
  })

  test('tables given as generators are consumed once and written fully', async () => {
    let started = 0
    function* orgs(): Generator<Org> {
      started++
      for (let i = 0; i < 12_000; i++) yield org(i)
    }
    await writeSnapshot(path, { format: 1, lsn: 1, meta: {}, tables: { organizations: orgs() } })
    expect(started).toBe(1)
    const read = await readSnapshot(path)
    expect(read?.tables.organizations).toHaveLength(12_000)
    expect(read?.tables.organizations?.[11_999]).toEqual(org(11_999))
  })

  test('serializing many records lets other work run in between', async () => {
    let immediates = 0
    let running = true
    const tick = (): void => {
      immediates++
      if (running) setImmediate(tick)
    }
    setImmediate(tick)
    const seen: number[] = []
    function* records(): Generator<{ id: number }> {
      for (let i = 0; i < 12_000; i++) {
        if (i === 0 || i === 11_999) seen.push(immediates)
        yield { id: i } // small records: no 1 MiB flush, so only the explicit yields help
      }
    }
    try {
      await writeSnapshot(path, { format: 1, lsn: 1, meta: {}, tables: { records: records() } })
    } finally {
      running = false
    }
    expect(seen[1]!).toBeGreaterThan(seen[0]!)
  })

  test('a write into a missing directory rejects and leaves nothing', async () => {
    const missing = join(dir, 'missing', 'snapshot.json')
    await expect(writeSnapshot(missing, bigSnapshot())).rejects.toThrow()
    expect(existsSync(join(dir, 'missing'))).toBe(false)
    expect(readdirSync(dir)).toEqual([])
  })

  test('a failed write removes the temp file and keeps the previous snapshot', async () => {
    await writeSnapshot(path, { format: 1, lsn: 1, meta: {}, tables: { organizations: [org(1)] } })
    function* failing(): Generator<Org> {
      yield org(2)
      throw new Error('boom')
    }
    await expect(writeSnapshot(path, { format: 1, lsn: 2, meta: {}, tables: { organizations: failing() } })).rejects.toThrow(
      'boom',
    )
    expect(readdirSync(dir)).toEqual(['snapshot.json'])
    expect((await readSnapshot(path))?.lsn).toBe(1)
  })

  test('a record without a JSON form fails the write', async () => {
    await expect(
      writeSnapshot(path, { format: 1, lsn: 1, meta: {}, tables: { organizations: [org(1), undefined] } }),
    ).rejects.toThrow(TypeError)
    expect(existsSync(path)).toBe(false)
    expect(readdirSync(dir)).toEqual([])
  })

  test('concurrent writes through one SnapshotFile do not clobber each other', async () => {
    const file = new SnapshotFile(path)
    await Promise.all([
      file.write({ format: 1, lsn: 1, meta: {}, tables: { records: bigSnapshot().tables.records! } }),
      file.write({ format: 1, lsn: 2, meta: {}, tables: { records: [org(1)] } }),
    ])
    const read = await file.read()
    expect(read?.lsn).toBe(2)
    expect(readdirSync(dir)).toEqual(['snapshot.json'])
  })
})

// The reader streams block by block and parses one record per line: multi-byte text, empty tables
// and many tables must come back exactly, and damage must still be placed at its byte offset.
describe('streaming the snapshot back', () => {
  test('multi-byte text across many blocks, empty tables and several tables read back exactly', async () => {
    const text = 'é漢字🙂\u2028"quoted"\\n'
    const people = Array.from({ length: 40_000 }, (_, i) => ({ id: i, name: `${text}${i}`, note: text.repeat(i % 5) }))
    await writeSnapshot(path, { format: 1, lsn: 9, meta: { by: text }, tables: { empty: [], people, last: [{ id: 'z' }], alsoEmpty: [] } })
    expect(blocksOf(path).length).toBeGreaterThan(2)
    const read = await readSnapshot(path)
    expect(read).toEqual({ format: 1, lsn: 9, meta: { by: text }, tables: { empty: [], people, last: [{ id: 'z' }], alsoEmpty: [] } })
  })

  test('a snapshot with no tables reads back', async () => {
    await writeSnapshot(path, { format: 1, lsn: 0, meta: {}, tables: {} })
    expect(await readSnapshot(path)).toEqual({ format: 1, lsn: 0, meta: {}, tables: {} })
  })

  test('a line that is not JSON is damage at its own byte offset, after multi-byte text', async () => {
    const lines = ['{"format":1,"lsn":1,"meta":{},"tables":{', '"people":[', '{"name":"漢字é"},', '{"name": oops},', '{"name":"z"}', ']},']
    const body = Buffer.from(lines.join('\n') + '\n')
    const trailer = `"integrity":{"algorithm":"crc32","blocks":[[0,${body.length},${Bun.hash.crc32(body)}]]}}\n`
    writeFileSync(path, Buffer.concat([body, Buffer.from(trailer)]))
    const error = await readError(path)
    expect(error.offset).toBe(Buffer.byteLength(lines.slice(0, 3).join('\n') + '\n'))
    expect(error.message).toContain('invalid JSON')
  })

  test('a line of a table that is neither a record nor an array, or a document that never ends, is damage', async () => {
    for (const lines of [
      ['{"format":1,"lsn":1,"meta":{},"tables":{', '"people":[', '12', ']},'],
      ['{"format":1,"lsn":1,"meta":{},"tables":{', '"people":[', '[1,2', ']},'],
      ['{"format":1,"lsn":1,"meta":{},"tables":{', '"people":[', '{"id":1}'],
    ]) {
      const body = Buffer.from(lines.join('\n') + '\n')
      const trailer = `"integrity":{"algorithm":"crc32","blocks":[[0,${body.length},${Bun.hash.crc32(body)}]]}}\n`
      writeFileSync(path, Buffer.concat([body, Buffer.from(trailer)]))
      expect(await readError(path)).toBeInstanceOf(SnapshotDamageError)
    }
  })

  test("a table's arrays (a form of its own) read back as written, beside its records", async () => {
    const lines = [['strings', 0, 'a', 'b'], { id: 1 }, ['events', 2, 'AAEC']]
    await writeSnapshot(path, { format: 1, lsn: 3, meta: {}, tables: { mixed: lines, empty: [] } })
    expect((await readSnapshot(path))?.tables).toEqual({ mixed: lines, empty: [] })
  })

  test("a line its table refuses (SnapshotLineError) is damage at that line's byte offset", async () => {
    await writeSnapshot(path, { format: 1, lsn: 1, meta: {}, tables: { mixed: [{ id: 1 }, ['bad'], { id: 2 }] } })
    const text = readFileSync(path, 'utf8')
    const error = await scanSnapshot(path, () => (line) => {
      if (Array.isArray(line)) throw new SnapshotLineError('not a line of this table')
    }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SnapshotDamageError)
    expect((error as SnapshotDamageError).offset).toBe(text.indexOf('["bad"]'))
    expect((error as SnapshotDamageError).message).toContain('not a line of this table')
  })
})
