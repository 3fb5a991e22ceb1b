/**
 * Data format versions (docs/operations.md, README "Versions and upgrades"): data dirs written by
 * older builds (test/fixtures: format 1 by the first release, format 2 by the last build before the
 * `format` file, format 3 by the last build with audit events as JSON lines in the snapshot, format
 * 4 by its first build, whose log held a create's event as an object without its changes) open
 * with this one and serve every record they held, after a clean stop or after SIGKILL; they are
 * labelled with the current format on opening. A newer format is refused.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDataDir } from '../support/temp-dirs'
import { keyward, killServers, startServer, stopServer } from '../support/server-process.ts'
import { copyFixture, FIXTURES } from '../support/data-dir-fixtures.ts'
import { dump, dumpAll, type Dump } from '../support/sample-data.ts'
import { DATA_FORMAT } from '../../src/store/format.ts'
import { SEGMENT_GROWTH_BYTES } from '../../src/store/wal.ts'
import { scanLog } from '../../src/store/log-format.ts'
import pkg from '../../package.json'

setDefaultTimeout(20000)

const newDir = () => tempDataDir('keyward-formats-')

afterEach(() => killServers())


/** A vendor admin token recorded by this build's issue-token (the old builds' kw1 tokens are 401 here). */
async function vendorToken(dir: string, vendorId: string): Promise<string> {
  const result = await keyward(['issue-token', '--data', dir, '--org', vendorId, '--role', 'admin'])
  expect(result).toMatchObject({ code: 0, stderr: '' })
  return result.stdout.trim()
}

const DIRS = [
  ['format-1-stopped', 1],
  ['format-1-killed', 1],
  ['format-2-stopped', 2],
  ['format-2-killed', 2],
  ['format-3-stopped', 3],
  ['format-3-killed', 3],
  // Format 4 as its first build wrote it (a create's event an object without its changes): a log to replay.
  ['format-4-e559aaa-killed', 4],
] as const

/**
 * What the server shows of what the fixture held: from format 3 on its tokens and audit events too
 * (`dumpAll`), less those made since (the test's own token, and its event).
 */
async function served(url: string, token: string, format: number, expected: Dump): Promise<Dump> {
  if (format < 3) return dump(url, token)
  const all = await dumpAll(url, token)
  return Object.fromEntries(Object.entries(all).filter(([key]) => Object.hasOwn(expected, key)))
}

describe('older data dirs open and serve what they held', () => {
  for (const [name, format] of DIRS) {
    test(`${name}: read beside no server (verify), then served with every record, labelled format ${DATA_FORMAT}`, async () => {
      const dir = newDir()
      const fixture = copyFixture(name, dir)
      const before = readdirSync(dir).sort()
      expect((await keyward(['verify', '--data', dir])).code).toBe(0)
      expect(readdirSync(dir).sort()).toEqual(before) // reading changed nothing

      const server = await startServer(dir)
      let token = ''
      try {
        token = await vendorToken(dir, fixture.vendor_id) // beside the server: through its control socket
        expect(await served(server.url, token, format, fixture.records)).toEqual(fixture.records)
      } finally {
        expect(await stopServer(server, 'SIGTERM')).toBe(0)
      }
      // The snapshot the stop wrote holds the audit events encoded (data format 4), not as records.
      const snapshot = readFileSync(join(dir, 'snapshot.json'), 'utf8')
      expect(snapshot).toContain('\n["events",')
      expect(snapshot).not.toContain('"event_id"')
      expect(readFileSync(join(dir, 'format'), 'utf8')).toBe(`${DATA_FORMAT}\n`)
      expect(statSync(join(dir, 'format')).mode & 0o777).toBe(0o600)
      // Format 1's unpadded segments are gone: what is left is in the current format.
      for (const file of readdirSync(dir).filter((n) => n.startsWith('wal-'))) {
        expect(statSync(join(dir, file)).size % SEGMENT_GROWTH_BYTES).toBe(0)
      }
      if (format === 1) expect(server.stderr.text).not.toContain('warning')

      const again = await startServer(dir)
      try {
        expect(await served(again.url, token, format, fixture.records)).toEqual(fixture.records)
      } finally {
        await stopServer(again, 'SIGKILL')
      }
    })
  }

  test('why format 1 needs its own reading: its segments end at their last record, which format 2 reads as a file cut short', () => {
    const path = join(FIXTURES, 'format-1-killed', 'data', readdirSync(join(FIXTURES, 'format-1-killed', 'data')).find((n) => n.startsWith('wal-'))!)
    const bytes = readFileSync(path)
    expect(() => scanLog(bytes, path)).toThrow(`${path}: damaged log record at offset ${bytes.length}: no padding after the last record`)
    const scan = scanLog(bytes, path, { padded: false })
    expect(scan).toMatchObject({ validEnd: bytes.length, tornTail: null })
    expect(scan.payloads.length).toBeGreaterThan(5)
  })
})

describe('a newer data format is refused', () => {
  for (const command of [['serve', '--port', '0'], ['issue-token', '--org', 'x', '--role', 'admin'], ['init']]) {
    test(`${command[0]}: exit 1, naming both format versions, nothing changed`, async () => {
      const dir = newDir()
      copyFixture('format-2-stopped', dir)
      writeFileSync(join(dir, 'format'), `${DATA_FORMAT + 1}\n`)
      // All but the lock file, which serve and init take before they read the format (README "The data dir").
      const files = () => readdirSync(dir).filter((name) => name !== 'serve.lock').map((name) => [name, readFileSync(join(dir, name))])
      const before = files()
      const result = await keyward([command[0]!, '--data', dir, ...command.slice(1)])
      expect(result.code).toBe(1)
      expect(result.stderr).toContain(`data format ${DATA_FORMAT + 1}`)
      expect(result.stderr).toContain(`data format ${DATA_FORMAT} and older`)
      expect(result.stderr).toContain(`keyward ${pkg.version}`)
      expect(result.stdout).toBe('')
      expect(files()).toEqual(before)
    })
  }

  test('an unreadable format file is damage: exit 1 naming it', async () => {
    const dir = newDir()
    copyFixture('format-2-stopped', dir)
    writeFileSync(join(dir, 'format'), 'two\n')
    const result = await keyward(['serve', '--data', dir, '--port', '0'])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`${join(dir, 'format')}: damaged at offset 0`)
  })
})

test('a new data dir is written in the current format, labelled at init', async () => {
  const dir = newDir()
  expect((await keyward(['init', '--data', dir])).code).toBe(0)
  expect(readFileSync(join(dir, 'format'), 'utf8')).toBe(`${DATA_FORMAT}\n`)
  expect(statSync(join(dir, 'format')).mode & 0o777).toBe(0o600)
})
