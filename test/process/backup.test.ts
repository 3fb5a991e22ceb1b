/**
 * `keyward backup` and `keyward restore` (docs/operations.md, README "Backup, restore, verify") with
 * the real CLI: backups taken beside a server under write load, compacting all the while, restore to
 * a dir that serves every write acknowledged before the backup began; restore refuses a dir that is
 * not empty and an archive that is damaged, and writes nothing then.
 */
import { afterAll, afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { api, canRunAsNobody, initLine, keyward, keywardAsNobody, keywardCommand, killServers, NOBODY, run, startServer, stopServer, underFileSizeLimit, waitFor, type ServerProcess } from '../support/server-process.ts'
import { copyFixture } from '../support/data-dir-fixtures.ts'
import { dump } from '../support/sample-data.ts'
import { flip } from '../support/damaged-dir.ts'
import { writeArchive } from '../../src/store/backup-archive.ts'
import { DATA_FORMAT } from '../../src/store/format.ts'
import { acquireDataDirLock, LOCK_FILE, noteOf } from '../../src/store/lock.ts'
import { parseTime } from '../../src/modules/audit/model.ts'

setDefaultTimeout(30000)

const parent = tempDir('keyward-backup-')
let made = 0
const newPath = (name: string) => join(parent, `${name}-${++made}`)

afterEach(() => killServers())
afterAll(() => rmSync(parent, { recursive: true, force: true }))

const modeOf = (path: string) => statSync(path).mode & 0o777

/** Every consumer id a server shows, page by page. */
async function consumerIds(url: string, token: string): Promise<Set<string>> {
  const ids = new Set<string>()
  for (let page = 1; ; page++) {
    const res = await api(url, token, 'GET', `/api/consumers?page=${page}&page_size=1000`)
    expect(res.status).toBe(200)
    for (const c of res.body.consumers) ids.add(c.consumer_id)
    if (res.body.consumers.length < 1000) return ids
  }
}

/**
 * Waits for `work` while the server writes one snapshot after another (SIGUSR1, the next once the last
 * is written): a backup then overlaps compactions, and must read again, every time.
 */
async function whileCompacting<T>(server: ServerProcess, work: Promise<T>): Promise<T> {
  const snapshots = () => server.stderr.text.match(/snapshot written|snapshot is already current/g)?.length ?? 0
  let done = false
  const compacting = (async () => {
    while (!done) {
      const next = snapshots() + 1
      server.proc.kill('SIGUSR1')
      await waitFor('a snapshot', () => snapshots() >= next, server.proc)
    }
  })()
  try {
    return await work
  } finally {
    done = true
    await compacting
  }
}

/** Restores `archive` into a new dir, checks the modes, and starts a server on it. */
async function restoreAndServe(archive: string): Promise<ServerProcess & { readonly data: string }> {
  const data = newPath('restored')
  const restored = await keyward(['restore', '--from', archive, '--data', data])
  expect(restored).toMatchObject({ code: 0, stderr: '' })
  expect(modeOf(data)).toBe(0o700)
  // No secret (tokens are recorded); the lock the restore wrote under stays, as every lock file does (src/store/lock.ts).
  expect(readdirSync(data).sort()).toEqual(['format', LOCK_FILE, 'snapshot.json'])
  for (const name of readdirSync(data)) expect([name, modeOf(join(data, name))]).toEqual([name, 0o600])
  return { ...(await startServer(data)), data }
}

describe('backup beside a server under write load, compacting', () => {
  test('each backup restores to a dir serving every write acknowledged before it began, and nothing never attempted', async () => {
    const data = newPath('live')
    const server = await startServer(data)
    const { organization_id: vendorId, token } = initLine(server)
    const customer = (await api(server.url, token, 'POST', '/api/organizations', { description: 'Acme', parent_id: vendorId })).body.organization.organization_id

    const attempted = new Set<string>()
    const acknowledged: string[] = []
    let writing = true
    const writer = async () => {
      while (writing) {
        const id = crypto.randomUUID()
        attempted.add(id)
        const res = await api(server.url, token, 'POST', '/api/consumers', { consumer_id: id, organization_id: customer })
        expect(res.status).toBe(201)
        acknowledged.push(id)
      }
    }
    const writers = Array.from({ length: 6 }, writer)

    const backups: { archive: string; before: string[] }[] = []
    try {
      for (let n = 1; n <= 2; n++) {
        await waitFor(`${n * 150} acknowledged writes`, () => acknowledged.length >= n * 150, server.proc)
        const archive = newPath('backup.tar')
        const before = acknowledged.slice() // acknowledged before the backup began
        const result = await whileCompacting(server, keyward(['backup', '--data', data, '--out', archive]))
        expect(result).toMatchObject({ code: 0, stderr: '' })
        expect(result.stdout).toMatch(new RegExp(`data format ${DATA_FORMAT}, log position \\d+`))
        expect(modeOf(archive)).toBe(0o600)
        expect(acknowledged.length).toBeGreaterThan(before.length) // the writes went on during the backup
        backups.push({ archive, before })
      }
    } finally {
      writing = false
      await Promise.all(writers)
    }
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    expect(readdirSync(data).filter((name) => name.includes('backup'))).toEqual([]) // backups leave nothing in the data dir

    for (const { archive, before } of backups) {
      const restored = await restoreAndServe(archive)
      try {
        const ids = await consumerIds(restored.url, token)
        expect(before.filter((id) => !ids.has(id))).toEqual([])
        expect([...ids].filter((id) => !attempted.has(id))).toEqual([])
      } finally {
        await stopServer(restored, 'SIGKILL')
      }
    }
  })
})

describe('backup of a stopped dir', () => {
  test('a data dir of the first release (format 1) is backed up without changing it, and restores in the current format', async () => {
    const data = newPath('old')
    const fixture = copyFixture('format-1-killed', data)
    const before = readdirSync(data).map((name) => [name, readFileSync(join(data, name))])
    const archive = newPath('old.tar')
    expect((await keyward(['backup', '--data', data, '--out', archive])).code).toBe(0)
    expect(readdirSync(data).map((name) => [name, readFileSync(join(data, name))])).toEqual(before)

    const server = await restoreAndServe(archive)
    try {
      // Issued beside the restored dir's server (the old dir's kw1 tokens are 401 in any case).
      const token = (await keyward(['issue-token', '--data', server.data, '--org', fixture.vendor_id, '--role', 'admin'])).stdout.trim()
      expect(await dump(server.url, token)).toEqual(fixture.records)
    } finally {
      await stopServer(server, 'SIGKILL')
    }
  })

  test('a damaged dir is not backed up: exit 1 naming the damage, no file written', async () => {
    const data = newPath('damaged')
    copyFixture('format-2-killed', data)
    flip(join(data, 'snapshot.json'), 40)
    const archive = newPath('damaged.tar')
    const result = await keyward(['backup', '--data', data, '--out', archive])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`${join(data, 'snapshot.json')}: damaged snapshot at offset 0`)
    expect(existsSync(archive)).toBe(false)
    expect(readdirSync(parent).filter((name) => name.startsWith('.keyward-backup-'))).toEqual([])
  })

  test('usage: --out is required (exit 2); a missing data dir is exit 1', async () => {
    expect((await keyward(['backup', '--data', newPath('none')])).code).toBe(2)
    const missing = await keyward(['backup', '--data', newPath('none'), '--out', newPath('x.tar')])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('does not exist')
  })

  test('an --out in a directory that does not exist: exit 1 saying so, nothing written', async () => {
    const data = newPath('data')
    expect((await keyward(['init', '--data', data])).code).toBe(0)
    const folder = newPath('nowhere')
    const result = await keyward(['backup', '--data', data, '--out', join(folder, 'x.tar')])
    expect([result.code, result.stderr.trim()]).toEqual([1, `keyward: the directory of --out, ${folder}, does not exist: create it first`])
    expect(existsSync(folder)).toBe(false)
  })

  test.skipIf(!canRunAsNobody)("an --out in a directory its user may not write in: exit 1 saying so before the dir is read (run as root: it runs as nobody)", async () => {
    // A tree nobody may enter (the tests' temp dirs are 0700), holding its data dir and a folder it may not write in.
    const tree = tempDir('keyward-backup-nobody-')
    try {
      chmodSync(tree, 0o755)
      const data = join(tree, 'data')
      expect((await keyward(['init', '--data', data])).code).toBe(0)
      for (const path of [data, ...readdirSync(data).map((name) => join(data, name))]) chownSync(path, NOBODY, NOBODY)
      const folder = join(tree, 'root-only')
      mkdirSync(folder, { mode: 0o755 })
      const result = await keywardAsNobody(['backup', '--data', data, '--out', join(folder, 'x.tar')])
      expect([result.code, result.stderr.trim()]).toEqual([1, `keyward: cannot write in ${folder}, the directory of --out (EACCES): write the archive where this user may`])
      expect(readdirSync(folder)).toEqual([])
    } finally {
      rmSync(tree, { recursive: true, force: true })
    }
  })

  test("in database mode backup and restore are the database's: exit 2 naming pg_dump, nothing written", async () => {
    const url = 'postgres://postgres@127.0.0.1:5432/keyward_not_used'
    const out = newPath('db.tar')
    const backup = await keyward(['backup', '--database-url', url, '--out', out])
    const restore = await keyward(['restore', '--database-url', url, '--from', out, '--data', newPath('restored')])
    for (const result of [backup, restore]) {
      expect(result.code).toBe(2)
      expect(result.stderr).toContain('pg_dump')
    }
    expect(existsSync(out)).toBe(false)
  })
})

describe('backup refuses', () => {
  test('an --out that is a directory: exit 1 before any work, nothing written there', async () => {
    const data = newPath('source')
    copyFixture('format-2-stopped', data)
    const out = newPath('backups')
    mkdirSync(out)
    const result = await keyward(['backup', '--data', data, '--out', out])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`--out ${out} is a directory: name the archive file to write, like ${join(out, 'keyward.tar')}`)
    expect(readdirSync(out)).toEqual([])
    expect(readdirSync(dirname(out)).filter((name) => name.startsWith('.keyward-backup-'))).toEqual([])
  })
})

describe('backup refuses an --out in the data dir', () => {
  test("exit 1 before any work: a file of the dir's own (the live log, the snapshot) is never replaced, nor one added", async () => {
    const data = newPath('source')
    copyFixture('format-3-stopped', data)
    const before = Object.fromEntries(readdirSync(data).map((name) => [name, readFileSync(join(data, name)).toString('base64')]))
    // The same dir by other paths: a link to it, and (where this may mount) a bind mount of it.
    const link = newPath('link')
    symlinkSync(data, link)
    const mounted = newPath('mounted')
    mkdirSync(mounted)
    const bound = Bun.spawnSync(['mount', '--bind', data, mounted], { stderr: 'ignore' }).exitCode === 0
    try {
      for (const name of [...Object.keys(before), 'keyward.tar']) {
        const outs = [join(data, name), join(data, '.', name), `${data}/../${basename(data)}/${name}`, join(link, name), ...(bound ? [join(mounted, name)] : [])]
        for (const out of outs) {
          const result = await keyward(['backup', '--data', data, '--out', out])
          expect({ out, code: result.code }).toEqual({ out, code: 1 })
          expect(result.stderr).toContain(`--out ${out} is in the data dir`)
        }
      }
    } finally {
      if (bound) Bun.spawnSync(['umount', mounted])
    }
    expect(Object.fromEntries(readdirSync(data).map((name) => [name, readFileSync(join(data, name)).toString('base64')]))).toEqual(before)
  })
})

describe('restore refuses, and writes nothing', () => {
  let archive = ''
  const good = async () => {
    if (archive) return archive
    const data = newPath('source')
    copyFixture('format-2-stopped', data)
    archive = newPath('good.tar')
    expect((await keyward(['backup', '--data', data, '--out', archive])).code).toBe(0)
    return archive
  }

  test('a dir that is not empty (exit 1), but takes one holding only dotfiles', async () => {
    const target = newPath('busy')
    mkdirSync(target)
    writeFileSync(join(target, 'notes.txt'), 'mine')
    const result = await keyward(['restore', '--from', await good(), '--data', target])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`data dir ${target} is not keyward's: it holds other files (notes.txt)`)
    expect(readdirSync(target)).toEqual(['notes.txt'])
    const restored = newPath('restored')
    expect((await keyward(['restore', '--from', await good(), '--data', restored])).code).toBe(0)
    const again = await keyward(['restore', '--from', await good(), '--data', restored])
    expect([again.code, again.stderr]).toEqual([1, expect.stringContaining(`${restored} holds a keyward data dir already: restore only into an empty or new dir`)])

    const dotted = newPath('dotted')
    mkdirSync(dotted, { mode: 0o755 })
    writeFileSync(join(dotted, '.keep'), '')
    expect((await keyward(['restore', '--from', await good(), '--data', dotted])).code).toBe(0)
    expect(modeOf(dotted)).toBe(0o700)
  })

  test('a restore that fails while writing (EFBIG: a file size limit, as a full disk would) takes its temporary file away, and a retry restores', async () => {
    const target = newPath('limited')
    const limited = await run(underFileSizeLimit(1, keywardCommand(['restore', '--from', await good(), '--data', target])))
    expect([limited.code, limited.stderr]).toEqual([1, expect.stringContaining('EFBIG')])
    expect(readdirSync(target)).toEqual([LOCK_FILE])
    expect((await keyward(['restore', '--from', await good(), '--data', target])).code).toBe(0)
    expect((await keyward(['verify', '--data', target])).code).toBe(0)
  })

  test("a dir whose lock another process holds (a server starting on it): exit 1, nothing written; the lock alone is no data", async () => {
    const target = newPath('starting')
    mkdirSync(target, { mode: 0o700 })
    const held = acquireDataDirLock(target)
    try {
      const result = await keyward(['restore', '--from', await good(), '--data', target])
      expect(result.code).toBe(1)
      expect(result.stderr).toContain(`data dir ${target} is already in use by another running keyward`)
      expect(readdirSync(target)).toEqual([LOCK_FILE])
    } finally {
      held.release()
    }
    // Once it is free, the dir (holding the lock file only) is restored into.
    expect((await keyward(['restore', '--from', await good(), '--data', target])).code).toBe(0)
    expect((await keyward(['verify', '--data', target])).code).toBe(0)
  })

  test('a damaged archive: a flipped byte in a file, in a header, in the checksums; cut short; not an archive', async () => {
    const bytes = readFileSync(await good())
    const snapshotStart = 512 // the first file's bytes follow its header
    const damaged: [string, Uint8Array, RegExp][] = [
      ['a byte of the snapshot', flipped(bytes, snapshotStart + 100), /snapshot\.json does not match its checksum/],
      ['a byte of a header', flipped(bytes, 20), /tar header checksum mismatch/],
      ['a byte of SHA256SUMS', flipped(bytes, checksumsOffset(bytes) + 3), /does not match its checksum|unreadable SHA256SUMS/],
      ['cut short', bytes.subarray(0, bytes.length - 1500), /ends before its end marker|cut off/],
      ['not an archive', new Uint8Array(4096).fill(7), /tar header checksum mismatch/],
    ]
    for (const [what, content, reason] of damaged) {
      const path = newPath('damaged.tar')
      writeFileSync(path, content)
      const target = newPath('target')
      const result = await keyward(['restore', '--from', path, '--data', target])
      expect([what, result.code]).toEqual([what, 1])
      expect(result.stderr).toContain(`${path}: damaged backup archive at offset`)
      expect(result.stderr).toMatch(reason)
      expect(existsSync(target)).toBe(false)
    }
  })

  test('an archive whose clock is no time keyward can use (past the year 9999, or not a note), its checksum matching: refused, nothing written', async () => {
    const data = newPath('clock-source')
    expect((await keyward(['init', '--data', data])).code).toBe(0)
    for (const [what, note] of [
      ['past the year 9999', noteOf(9_000_000_000_000_000_000)],
      ['not a note', 'garbage\n'],
    ] as const) {
      const path = newPath('bad-clock.tar')
      const file = await open(path, 'wx', 0o600)
      await writeArchive(file, [
        { name: 'snapshot.json', path: join(data, 'snapshot.json') },
        { name: 'format', bytes: Buffer.from(`${DATA_FORMAT}\n`) },
        { name: LOCK_FILE, bytes: Buffer.from(note) },
      ])
      await file.close()
      const target = newPath('target')
      const result = await keyward(['restore', '--from', path, '--data', target])
      expect([what, result.code]).toEqual([what, 1])
      expect(result.stderr).toContain(`${LOCK_FILE} holds no time keyward can use`)
      expect(existsSync(target)).toBe(false)
    }
  })

  test.skipIf(!canRunAsNobody)("an --out this user may not replace (another user's file in a sticky directory): exit 1 naming --out, not a temporary file (run as root: it runs as nobody)", async () => {
    const data = newPath('given-away')
    expect((await keyward(['init', '--data', data])).code).toBe(0)
    for (const name of readdirSync(data)) chownSync(join(data, name), NOBODY, NOBODY)
    chownSync(data, NOBODY, NOBODY)
    chmodSync(dirname(data), 0o755)
    const shared = newPath('shared')
    mkdirSync(shared, { mode: 0o1777 })
    chmodSync(shared, 0o1777)
    const out = join(shared, 'backup.tar')
    writeFileSync(out, 'root\'s file\n')
    const result = await keywardAsNobody(['backup', '--data', data, '--out', out])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`cannot replace --out ${out} (EPERM): it is a file this user may not replace`)
    expect(readFileSync(out, 'utf8')).toBe("root's file\n")
    expect(readdirSync(shared)).toEqual(['backup.tar'])
  })

  test('an archive of a newer data format: exit 1 naming both versions', async () => {
    const path = newPath('newer.tar')
    const file = await open(path, 'wx', 0o600)
    await writeArchive(file, [
      { name: 'snapshot.json', bytes: Buffer.from('{}') },
      { name: 'format', bytes: Buffer.from(`${DATA_FORMAT + 1}\n`) },
    ])
    await file.close()
    const target = newPath('target')
    const result = await keyward(['restore', '--from', path, '--data', target])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`is in data format ${DATA_FORMAT + 1}, newer than keyward`)
    expect(result.stderr).toContain(`(data format ${DATA_FORMAT} and older)`)
    expect(existsSync(target)).toBe(false)
  })

  test('an archive holding the secret of a version with signed tokens restores everything but the secret', async () => {
    const data = newPath('signed-era')
    const fixture = copyFixture('format-2-stopped', data)
    // As such a version wrote it: the snapshot (of a clean stop, so it holds everything), the format, the secret.
    const path = newPath('signed-era.tar')
    const file = await open(path, 'wx', 0o600)
    await writeArchive(file, [
      { name: 'snapshot.json', path: join(data, 'snapshot.json') },
      { name: 'format', bytes: Buffer.from('2\n') },
      { name: 'secret', bytes: readFileSync(join(data, 'secret')) },
    ])
    await file.close()
    const server = await restoreAndServe(path)
    try {
      const token = (await keyward(['issue-token', '--data', server.data, '--org', fixture.vendor_id, '--role', 'admin'])).stdout.trim()
      expect(await dump(server.url, token)).toEqual(fixture.records)
    } finally {
      await stopServer(server, 'SIGKILL')
    }
  })

  test("the backup carries the store's clock: restored where the system clock is behind it, time goes on from the backup's (a token that had expired stays expired)", async () => {
    const data = newPath('clock')
    const server = await startServer(data)
    const { organization_id: vendorId, token } = initLine(server)
    const hourToken = (await api(server.url, token, 'POST', '/api/tokens', { organization_id: vendorId, role: 'viewer', ttl: '1h' })).body.secret
    expect((await api(server.url, hourToken, 'GET', `/api/organizations/${vendorId}`)).status).toBe(200)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    // As if the server had run on for a day with no write (it notes its clock in serve.lock every
    // few seconds), and the system clock had then been set back by that day.
    const dayOnMicros = (Date.now() + 86_400_000) * 1000
    writeFileSync(join(data, LOCK_FILE), noteOf(dayOnMicros))
    const archive = newPath('clock.tar')
    expect((await keyward(['backup', '--data', data, '--out', archive])).code).toBe(0)

    const restored = await restoreAndServe(archive)
    try {
      expect((await api(restored.url, hourToken, 'GET', `/api/organizations/${vendorId}`)).status).toBe(401)
      const created = (await api(restored.url, token, 'POST', '/api/organizations', { description: 'After', parent_id: vendorId })).body.organization.created
      expect(parseTime(created, 'up')! >= dayOnMicros).toBe(true)
    } finally {
      await stopServer(restored, 'SIGKILL')
    }
  })

  test('a --from that does not exist: exit 1 saying so, nothing written', async () => {
    const data = newPath('t')
    const from = newPath('none.tar')
    const result = await keyward(['restore', '--from', from, '--data', data])
    expect([result.code, result.stderr.trim()]).toEqual([1, `keyward: backup ${from} does not exist or is not a file`])
    expect(existsSync(data)).toBe(false)
  })

  test('usage: --from and --data are required (exit 2)', async () => {
    expect((await keyward(['restore', '--data', newPath('t')])).code).toBe(2)
    expect((await keyward(['restore', '--from', await good()])).code).toBe(2)
  })
})

function flipped(bytes: Uint8Array, at: number): Uint8Array {
  const copy = Uint8Array.from(bytes)
  copy[at] = copy[at]! ^ 0x5a
  return copy
}

/** Where SHA256SUMS's bytes start: after its header, which names it. */
function checksumsOffset(bytes: Uint8Array): number {
  const header = Buffer.from(bytes).indexOf('SHA256SUMS\0')
  expect(header % 512).toBe(0)
  return header + 512
}
