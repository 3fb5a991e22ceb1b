/**
 * Data format detection and upgrade (src/store/format.ts): the format of a dir written before the
 * `format` file is told from its files, whatever else an operator did to it, and a format 1 upgrade
 * cut short anywhere is finished by the next open.
 */
import { describe, expect, test } from 'bun:test'
import { readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDataDir } from '../support/temp-dirs'
import { copyFixture } from '../support/data-dir-fixtures.ts'
import { Store } from '../../src/store/store.ts'
import { DATA_FORMAT, readDataFormat } from '../../src/store/format.ts'
import { readDataDir } from '../../src/store/read-only.ts'
import { snapshotOf } from '../../src/store/tables-snapshot.ts'
import { writeSnapshot } from '../../src/store/snapshot-file.ts'

const newDir = () => tempDataDir('keyward-format-')

const segments = (dir: string) => readdirSync(dir).filter((name) => name.startsWith('wal-'))

describe('a dir without a format file', () => {
  test('empty: new, in the current format', async () => {
    const dir = newDir()
    await Bun.write(join(dir, '.keep'), '')
    expect(await readDataFormat(dir)).toEqual({ version: DATA_FORMAT, source: 'new' })
  })

  test('written by the first release: format 1', async () => {
    const dir = newDir()
    copyFixture('format-1-stopped', dir)
    expect(await readDataFormat(dir)).toEqual({ version: 1, source: 'detected' })
  })

  test('format 2, its secret replaced by hand (the secret is not looked at): still format 2, by its padded log', async () => {
    const dir = newDir()
    copyFixture('format-2-stopped', dir)
    expect(await readDataFormat(dir)).toEqual({ version: 2, source: 'detected' })
    writeFileSync(join(dir, 'secret'), `${'ab'.repeat(32)}\n`)
    expect(await readDataFormat(dir)).toEqual({ version: 2, source: 'detected' })
  })

  test('a dir this build made (without a secret), its format file deleted: format 2, by its padded log', async () => {
    const dir = newDir()
    const store = await Store.open(dir, { log: () => {} })
    await store.commit((tx) => tx.put('consumers', { consumer_id: 'c1', organization_id: 'o', state: 'active', created: 1, modified: 1 }))
    await store.close()
    unlinkSync(join(dir, 'format'))
    expect(await readDataFormat(dir)).toEqual({ version: 2, source: 'detected' })
  })
})

describe('a dir labelled format 2 (before recorded tokens)', () => {
  test('is read as it is, and only labelled when opened for writing', async () => {
    const dir = newDir()
    copyFixture('format-2-stopped', dir)
    writeFileSync(join(dir, 'format'), '2\n')
    expect(await readDataFormat(dir)).toEqual({ version: 2, source: 'file' })
    const before = (await readDataDir(dir)).tables
    const store = await Store.open(dir, { log: () => {} })
    expect(store.tables.consumers.size).toBe(before.consumers.size)
    expect(store.tables.tokens.size).toBe(0) // its tokens were signed, never recorded
    await store.close()
    expect(await readDataFormat(dir)).toEqual({ version: DATA_FORMAT, source: 'file' })
  })
})

describe('a dir labelled format 3 (audit events as records in the snapshot)', () => {
  test('is read as it is, labelled 4 when opened for writing, and its next snapshot holds the events encoded', async () => {
    const dir = newDir()
    const fixture = copyFixture('format-3-stopped', dir)
    expect(await readDataFormat(dir)).toEqual({ version: 3, source: 'file' })
    const before = (await readDataDir(dir)).tables
    const events = [...before.audit_events.values()]
    expect(events.length).toBe(Object.keys(fixture.records).filter((key) => key.startsWith('audit event ')).length)
    const store = await Store.open(dir, { log: () => {} })
    expect(await readDataFormat(dir)).toEqual({ version: 4, source: 'file' })
    expect([...store.tables.audit_events.values()]).toEqual(events)
    await store.commit((tx) => tx.dropOldest('audit_events', 1)) // something new, so closing writes a snapshot
    await store.close()
    expect(DATA_FORMAT).toBe(4)
    const snapshot = readFileSync(join(dir, 'snapshot.json'), 'utf8')
    expect(snapshot).toContain('\n["events",')
    expect(snapshot).not.toContain('"event_id"')
    const after = (await readDataDir(dir)).tables
    expect(after.audit_events.size).toBe(events.length - 1)
    expect([...after.audit_events.values()]).toEqual(events.slice(1))
    expect(after.consumers.size).toBe(before.consumers.size)
  })
})

describe('the format 1 upgrade, cut short', () => {
  /** A format 1 fixture as an upgrade leaves it after its snapshot, and (if `segmentsDeleted`) after deleting its segments. */
  async function cutShort(segmentsDeleted: boolean): Promise<{ dir: string; consumers: number }> {
    const dir = newDir()
    copyFixture('format-1-killed', dir)
    const { tables, recovered } = await readDataDir(dir)
    await writeSnapshot(join(dir, 'snapshot.json'), snapshotOf(tables, recovered.lastLsn))
    if (segmentsDeleted) for (const name of segments(dir)) unlinkSync(join(dir, name))
    return { dir, consumers: tables.consumers.size }
  }

  for (const segmentsDeleted of [false, true]) {
    test(`after the snapshot${segmentsDeleted ? ' and the deletion of the segments' : ''}: still format 1, finished by the next open`, async () => {
      const { dir, consumers } = await cutShort(segmentsDeleted)
      expect(await readDataFormat(dir)).toEqual({ version: 1, source: 'detected' })
      const store = await Store.open(dir, { log: () => {} })
      expect(store.tables.consumers.size).toBe(consumers)
      await store.close()
      expect(await readDataFormat(dir)).toEqual({ version: DATA_FORMAT, source: 'file' })
      expect((await readDataDir(dir)).tables.consumers.size).toBe(consumers)
    })
  }
})
