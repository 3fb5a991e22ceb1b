/**
 * Which data dirs keyward accepts (README "The data dir"), and that a start
 * that fails leaves nothing behind (README "Configuration"): the real CLI (`serve`, `init`, the token commands,
 * `restore`, `verify`, `backup`) on dirs that are
 * symbolic links, owned by another user or not keyward's; a `secret` left by a version with signed
 * tokens is ignored when private, and refused otherwise (README "The data dir"). A refused dir is left exactly as it was: no file added, its
 * mode unchanged.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { api, canRunAsNobody, initLine, keyward, keywardAsNobody, killServers, NOBODY, startServer, stopServer, type Result } from '../support/server-process.ts'

setDefaultTimeout(15000)

const dirs: string[] = []

afterEach(async () => {
  await killServers()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** A fresh temp dir to build data dirs in. */
function newParent(): string {
  const parent = tempDir('keyward-data-dir-')
  dirs.push(parent)
  return parent
}

const serve = (data: string, ...args: string[]) => keyward(['serve', '--data', data, '--port', '0', ...args])

/** Names and modes of what is in `dir`, and its own mode: what a refused start must not change. */
function snapshotOf(dir: string): { mode: number; entries: string[] } {
  return { mode: statSync(dir).mode & 0o777, entries: readdirSync(dir).sort() }
}

function expectRefused(result: Result, message: string): void {
  expect(result.code).toBe(1)
  expect(result.stdout).toBe('') // no token
  expect(result.stderr).toContain(message)
  expect(result.stderr).not.toContain('listening')
}

/** An initialised data dir. */
async function initialised(): Promise<string> {
  const data = join(newParent(), 'data')
  expect((await keyward(['init', '--data', data])).code).toBe(0)
  return data
}

const UID = process.getuid!()
const OTHER_UID = NOBODY
const asRoot = UID === 0

describe('the data dir', () => {
  test("'..' after a link is the kernel's: the dir above where the link points, checked, made private and used as one", async () => {
    const parent = newParent()
    mkdirSync(join(parent, 'owned/.sub'), { recursive: true, mode: 0o755 })
    mkdirSync(join(parent, 'elsewhere'), { mode: 0o755 })
    symlinkSync(join(parent, 'owned/.sub'), join(parent, 'elsewhere/.lk'))
    // `elsewhere/.lk/..` is `owned` (holding only the dotfile dir `.sub`): initialised there, and only there.
    // (Written out: path.join would drop `.lk/..` as text.)
    const result = await keyward(['init', '--data', `${parent}/elsewhere/.lk/..`])
    expect(result.code).toBe(0)
    expect(readdirSync(join(parent, 'owned'))).toContain('snapshot.json')
    expect(statSync(join(parent, 'owned')).mode & 0o777).toBe(0o700)
    expect(readdirSync(join(parent, 'elsewhere'))).toEqual(['.lk'])
    expect(statSync(join(parent, 'elsewhere')).mode & 0o777).toBe(0o755)
    // A '..' after a directory that does not exist names no place: refused, nothing made.
    const missing = await keyward(['init', '--data', `${parent}/nope/../data`])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain("'..' after a directory that does not exist")
    expect(existsSync(join(parent, 'data'))).toBe(false)
    // An empty path is bad usage.
    expect((await keyward(['init', '--data', ''])).code).toBe(2)
  })

  test('a symbolic link to a data dir is refused, with or without a trailing slash or dot', async () => {
    const data = await initialised()
    const link = join(data, '..', 'link')
    symlinkSync(data, link)
    const issue = ['issue-token', '--data', link, '--org', '00000000-0000-4000-8000-000000000000', '--role', 'admin']
    const [plain, slash, init, issued, listed, dotted] = await Promise.all([
      serve(link),
      serve(`${link}/`),
      keyward(['init', '--data', link]),
      keyward(issue),
      keyward(['tokens', 'list', '--data', link]),
      keyward(['tokens', 'list', '--data', `${link}/./`]),
    ])
    expectRefused(plain, `data dir ${link} is a symbolic link: give keyward the path of the directory itself`)
    expectRefused(slash, `data dir ${link} is a symbolic link`) // named as the kernel resolves it
    expectRefused(init, `data dir ${link} is a symbolic link`)
    expectRefused(issued, `data dir ${link} is a symbolic link`)
    expectRefused(listed, `data dir ${link} is a symbolic link`)
    expectRefused(dotted, `data dir ${link} is a symbolic link`) // `link/.` names the link too
  })

  test.skipIf(!canRunAsNobody)('a data dir its user may not create: init, serve and restore exit 1 saying so (run as root: they run as nobody)', async () => {
    const parent = newParent()
    chmodSync(parent, 0o755) // nobody may enter it, not write in it
    const archive = join(newParent(), 'backup.tar')
    expect((await keyward(['backup', '--data', await initialised(), '--out', archive])).code).toBe(0)
    chmodSync(archive, 0o644)
    chmodSync(dirname(archive), 0o755)
    const message = (data: string) => `cannot create data dir ${data} (EACCES): create it for the user that runs keyward, or give a path that user may write`
    const [init, served, restored] = await Promise.all([
      keywardAsNobody(['init', '--data', join(parent, 'a')]),
      keywardAsNobody(['serve', '--data', join(parent, 'b'), '--port', '0']),
      keywardAsNobody(['restore', '--from', archive, '--data', join(parent, 'c')]),
    ])
    expectRefused(init, message(join(parent, 'a')))
    expectRefused(served, message(join(parent, 'b')))
    expectRefused(restored, message(join(parent, 'c')))
    expect(readdirSync(parent)).toEqual([])
  })

  test.skipIf(!canRunAsNobody)('a data dir its owner may not write in (chmod u-w): serve, init and issue-token exit 1 saying so (not the EACCES of a file made after recovery), and change nothing; tokens list and verify read it (run as root: they run as nobody)', async () => {
    const data = await initialised()
    const archive = join(newParent(), 'backup.tar')
    expect((await keyward(['backup', '--data', data, '--out', archive])).code).toBe(0)
    chmodSync(archive, 0o644)
    chmodSync(dirname(archive), 0o755)
    chmodSync(dirname(data), 0o755)
    for (const entry of readdirSync(data)) chownSync(join(data, entry), NOBODY, NOBODY)
    chownSync(data, NOBODY, NOBODY)
    chmodSync(data, 0o500)
    const before = readdirSync(data).sort()
    const vendor = (await keyward(['verify', '--data', data])).stdout.match(/[0-9a-f-]{36}/)?.[0]
    const message = `data dir ${data} may not be written by the user running keyward (EACCES)`
    const results = await Promise.all([
      keywardAsNobody(['serve', '--data', data, '--port', '0']),
      keywardAsNobody(['init', '--data', data]),
      keywardAsNobody(['restore', '--from', archive, '--data', data]),
      keywardAsNobody(['issue-token', '--data', data, '--org', vendor!, '--role', 'viewer']),
    ])
    const [served, init, restored, issued] = results
    for (const result of [served!, init!, issued!]) expectRefused(result, message)
    // A dir holding data is no place to restore into, writable or not: that is said first.
    expectRefused(restored!, 'holds a keyward data dir already')
    // What only reads still reads it.
    const [listed, verified] = await Promise.all([keywardAsNobody(['tokens', 'list', '--data', data]), keywardAsNobody(['verify', '--data', data])])
    expect([listed.code, listed.stdout.split('\n').filter(Boolean).length, verified.code]).toEqual([0, 1, 0])
    expect(readdirSync(data).sort()).toEqual(before)
  })

  test.skipIf(!canRunAsNobody)("EACCES said with what to fix: a directory on the path this user may not search; a dir given to the user but not its files (init run as root) (run as root: they run as nobody)", async () => {
    const data = await initialised()
    const parent = dirname(data)
    chmodSync(parent, 0o700) // root's: nobody may not search it
    // The dir itself, whose parent may not be searched, and one further down.
    const deeper = join(parent, 'inner', 'data')
    const results = await Promise.all([
      keywardAsNobody(['verify', '--data', data]),
      keywardAsNobody(['serve', '--data', data, '--port', '0']),
      keywardAsNobody(['verify', '--data', deeper]),
      keywardAsNobody(['serve', '--data', deeper, '--port', '0']),
    ])
    for (const [i, result] of results.entries()) {
      expectRefused(result, `data dir ${i < 2 ? data : deeper} cannot be reached: a directory on its path may not be searched by this user (EACCES)`)
      expect(result.stderr).not.toMatch(/realpath|lstat/)
    }
    chmodSync(parent, 0o755)
    chownSync(data, NOBODY, NOBODY) // the dir only: its files are still root's
    const out = newParent()
    chownSync(out, NOBODY, NOBODY)
    const [listed, backedUp] = await Promise.all([keywardAsNobody(['verify', '--data', data]), keywardAsNobody(['backup', '--data', data, '--out', join(out, 'b.tar')])])
    for (const result of [listed, backedUp]) {
      expect(result.code).toBe(1)
      expect(result.stderr).toMatch(/may not be opened by this user \(EACCES\): run keyward as the user that owns it; a data dir and every file in it must be that user's \(chown -R\)/)
    }
  })

  test.skipIf(!asRoot)('a dir owned by another user is refused and left as it was (run as root: the owner must be the running uid)', async () => {
    const empty = join(newParent(), 'data')
    mkdirSync(empty)
    const initialisedDir = await initialised()
    for (const data of [empty, initialisedDir]) {
      chmodSync(data, 0o755)
      chownSync(data, OTHER_UID, OTHER_UID)
    }
    const before = [snapshotOf(empty), snapshotOf(initialisedDir)]
    const message = (data: string) =>
      `data dir ${data} is owned by uid ${OTHER_UID}, not by uid ${UID} that runs keyward: run keyward as its owner, or chown it to uid ${UID}`
    const archive = join(newParent(), 'backup.tar')
    expect((await keyward(['backup', '--data', await initialised(), '--out', archive])).code).toBe(0)
    const [serveEmpty, initEmpty, serveInitialised, restoreEmpty, verifyInitialised] = await Promise.all([
      serve(empty),
      keyward(['init', '--data', empty]),
      serve(initialisedDir),
      keyward(['restore', '--from', archive, '--data', empty]),
      keyward(['verify', '--data', initialisedDir]),
    ])
    expectRefused(serveEmpty, message(empty))
    expectRefused(initEmpty, message(empty))
    expectRefused(serveInitialised, message(initialisedDir))
    expect([restoreEmpty.code, restoreEmpty.stderr]).toEqual([1, expect.stringContaining(message(empty))])
    expectRefused(verifyInitialised, message(initialisedDir))
    expect([snapshotOf(empty), snapshotOf(initialisedDir)]).toEqual(before)
  })

  test('a dir holding files that are not keyward\'s is not adopted, by serve or init, and left as it was, even beside a `format` or a lock file', async () => {
    // `format` and `serve.lock` are the files a first start writes before any data: they prove nothing.
    for (const startFiles of [[], ['format'], ['serve.lock'], ['format', 'serve.lock', 'format.tmp', 'wal-00000000000000000001.log.tmp']]) {
      const data = join(newParent(), 'data')
      mkdirSync(data, { mode: 0o755 })
      chmodSync(data, 0o755)
      writeFileSync(join(data, '.gitignore'), '*\n')
      writeFileSync(join(data, 'notes.txt'), 'mine\n')
      for (const name of startFiles) writeFileSync(join(data, name), '')
      const before = snapshotOf(data)
      const message = `data dir ${data} is not keyward's: it holds other files (notes.txt); give keyward an empty directory, or one that holds only dotfiles`
      const [served, init] = await Promise.all([serve(data), keyward(['init', '--data', data])])
      expectRefused(served, message)
      expectRefused(init, message)
      expect(snapshotOf(data)).toEqual(before)
    }
  })

  test('verify and backup check the dir as every command does: a symbolic link, or a dir that is not keyward\'s, is exit 1 and left as it was', async () => {
    const data = await initialised()
    const link = join(data, '..', 'link')
    symlinkSync(data, link)
    const foreign = join(newParent(), 'foreign')
    mkdirSync(foreign)
    writeFileSync(join(foreign, 'notes.txt'), 'mine\n')
    const out = join(newParent(), 'backup.tar')
    const [verifyLink, backupLink, verifyForeign] = await Promise.all([
      keyward(['verify', '--data', link]),
      keyward(['backup', '--data', link, '--out', out]),
      keyward(['verify', '--data', foreign]),
    ])
    expectRefused(verifyLink, `data dir ${link} is a symbolic link`)
    expectRefused(backupLink, `data dir ${link} is a symbolic link`)
    expectRefused(verifyForeign, `data dir ${foreign} is not keyward's`)
    expect(existsSync(out)).toBe(false)
    expect(readdirSync(foreign)).toEqual(['notes.txt'])
  })

  test('a dir holding only dotfiles is initialised and made 0700; its dotfiles stay', async () => {
    const data = join(newParent(), 'data')
    mkdirSync(data, { mode: 0o755 })
    chmodSync(data, 0o755)
    writeFileSync(join(data, '.gitignore'), '*\n')
    const server = await startServer(data)
    const { token } = initLine(server)
    expect((await api(server.url, token, 'GET', '/api/organizations')).status).toBe(200)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    expect(statSync(data).mode & 0o777).toBe(0o700)
    expect(readdirSync(data)).toContain('.gitignore')
    expect(readdirSync(data)).toContain('format')
    expect(readdirSync(data)).not.toContain('secret') // tokens are recorded: there is no signing secret
  })

  test('a dir holding only what a first start writes before any data (the lock, `format`) is made 0700 by init, serve and restore', async () => {
    const archive = join(newParent(), 'backup.tar')
    expect((await keyward(['backup', '--data', await initialised(), '--out', archive])).code).toBe(0)
    const startedOnce = () => {
      const data = join(newParent(), 'data')
      mkdirSync(data, { mode: 0o755 })
      chmodSync(data, 0o755)
      writeFileSync(join(data, 'serve.lock'), '')
      return data
    }
    const [viaInit, viaServe, viaRestore] = [startedOnce(), startedOnce(), startedOnce()]
    expect((await keyward(['init', '--data', viaInit])).code).toBe(0)
    const server = await startServer(viaServe)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    expect((await keyward(['restore', '--from', archive, '--data', viaRestore])).code).toBe(0)
    for (const data of [viaInit, viaServe, viaRestore]) expect({ data, mode: statSync(data).mode & 0o777 }).toEqual({ data, mode: 0o700 })
  })

  test('init on a dir holding only dotfiles initialises it', async () => {
    const data = join(newParent(), 'data')
    mkdirSync(data)
    writeFileSync(join(data, '.keep'), '')
    const result = await keyward(['init', '--data', data])
    expect(result.code).toBe(0)
    expect(statSync(data).mode & 0o777).toBe(0o700)
  })

  test('a keyward data dir keeps the mode its owner gave it: serve and the token commands never change it', async () => {
    const data = join(newParent(), 'data')
    const init = await keyward(['init', '--data', data])
    expect(init.code).toBe(0)
    const vendor = JSON.parse(init.stdout).organization_id
    chmodSync(data, 0o750)
    const server = await startServer(data)
    const [issued, listed] = await Promise.all([
      keyward(['issue-token', '--data', data, '--org', vendor, '--role', 'viewer']),
      keyward(['tokens', 'list', '--data', data]),
    ])
    expect([issued.code, listed.code]).toEqual([0, 0])
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    const [verified, again] = await Promise.all([keyward(['verify', '--data', data]), keyward(['tokens', 'list', '--data', data])])
    expect([verified.code, again.code]).toEqual([0, 0])
    expect(statSync(data).mode & 0o777).toBe(0o750)
    for (const name of readdirSync(data)) if (!name.endsWith('.sock')) expect({ name, mode: statSync(join(data, name)).mode & 0o777 }).toEqual({ name, mode: 0o600 })
  })

  test('a data dir path that is a file is refused', async () => {
    const file = join(newParent(), 'data')
    writeFileSync(file, 'not a dir')
    expectRefused(await serve(file), `data dir ${file} is not a directory`)
  })
})

describe('the secret of a version with signed tokens', () => {
  test('a private one (a regular file of the running user, mode 0600) is ignored: serve, issue-token and tokens list work', async () => {
    const data = await initialised()
    writeFileSync(join(data, 'secret'), `${'ab'.repeat(32)}\n`, { mode: 0o600 })
    const server = await startServer(data)
    const vendorId = await vendorOf(data)
    const issued = await keyward(['issue-token', '--data', data, '--org', vendorId, '--role', 'viewer'])
    expect([issued.code, issued.stderr]).toEqual([0, ''])
    expect((await api(server.url, issued.stdout.trim(), 'GET', '/api/organizations')).status).toBe(200)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })

  test('one that others may read, a symbolic link, a directory or (as root) another user\'s: every command refuses the dir (exit 1) saying what to fix, and leaves it as it was', async () => {
    const data = await initialised()
    const vendorId = await vendorOf(data)
    const secret = join(data, 'secret')
    /** A secret as such a version wrote it, then given `mode` (set apart from the umask). */
    const secretWithMode = (mode: number) => {
      writeFileSync(secret, `${'ab'.repeat(32)}\n`, { mode: 0o600 })
      chmodSync(secret, mode)
    }
    const kinds: [string, () => void, string][] = [
      ['readable by others', () => secretWithMode(0o644), 'may be read by others (mode 0644): it is no longer used (tokens are recorded, not signed): delete it, or chmod 600 it'],
      ['readable by the group', () => secretWithMode(0o640), 'may be read by others (mode 0640)'],
      ['a symbolic link', () => symlinkSync(join(data, '..', 'nowhere'), secret), 'is not a regular file: it is no longer used (tokens are recorded, not signed): delete it'],
      ['a directory', () => mkdirSync(secret), 'is not a regular file'],
    ]
    if (asRoot) {
      kinds.push(['another user\'s', () => (secretWithMode(0o600), chownSync(secret, OTHER_UID, OTHER_UID)), `is owned by uid ${OTHER_UID}, not by uid ${UID} that runs keyward`])
    }
    for (const [kind, make, message] of kinds) {
      rmSync(secret, { recursive: true, force: true })
      make()
      const before = snapshotOf(data)
      const results = await Promise.all([
        serve(data),
        keyward(['issue-token', '--data', data, '--org', vendorId, '--role', 'viewer']),
        keyward(['tokens', 'list', '--data', data]),
        keyward(['verify', '--data', data]),
        keyward(['backup', '--data', data, '--out', join(newParent(), 'backup.tar')]),
      ])
      for (const result of results) {
        expect({ kind, code: result.code }).toEqual({ kind, code: 1 })
        expect(result.stderr).toContain(`${secret} ${message}`)
        expect(result.stdout).toBe('')
      }
      expect(snapshotOf(data)).toEqual(before)
    }
  }, 60000)
})

/** The vendor's id, from `tokens list` (its first token is the one init printed). */
async function vendorOf(data: string): Promise<string> {
  const listed = await keyward(['tokens', 'list', '--data', data])
  expect(listed.code).toBe(0)
  return JSON.parse(listed.stdout.split('\n')[0]!).organization_id as string
}

describe('a start that fails leaves nothing behind', () => {
  /** Each start that cannot listen, on a missing dir and on one holding only a dotfile. */
  async function expectNothingLeft(args: string[], message: string): Promise<void> {
    const parent = newParent()
    const missing = join(parent, 'missing')
    const dotfilesOnly = join(parent, 'dotfiles-only')
    mkdirSync(dotfilesOnly, { mode: 0o755 })
    chmodSync(dotfilesOnly, 0o755)
    writeFileSync(join(dotfilesOnly, '.gitignore'), '*\n')
    const before = snapshotOf(dotfilesOnly)
    const [intoMissing, intoDotfilesOnly] = await Promise.all([serve(missing, ...args), serve(dotfilesOnly, ...args)])
    expectRefused(intoMissing, message)
    expect(existsSync(missing)).toBe(false)
    expectRefused(intoDotfilesOnly, message)
    expect(snapshotOf(dotfilesOnly)).toEqual(before) // no secret, no log, no lock file, same mode
  }

  test('a port already taken', async () => {
    const blocker = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data: () => {} } })
    try {
      await expectNothingLeft(['--port', String(blocker.port)], `cannot listen on 127.0.0.1:${blocker.port}: port ${blocker.port} is already in use`)
    } finally {
      blocker.stop(true)
    }
  })

  test('a host that does not resolve', async () => {
    await expectNothingLeft(['--host', 'no-such-host.invalid'], 'cannot listen on no-such-host.invalid:0')
  })
})
