/**
 * The real CLI as a process (README "Configuration" and docs/storage.md): exit codes, what goes to stdout and
 * stderr, start-up on an empty dir, the data dir lock, crash safety, graceful stop, refusing damage.
 * Servers bind `--port 0`; readiness is the "listening on http://host:PORT" line on stderr.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDataDir } from '../support/temp-dirs'
import { api, initLine, isDataDirLocked, keyward, keywardCommand, killServers, run, startServer, stopServer, waitFor } from '../support/server-process.ts'
import { tokenIdOf } from '../../src/auth/tokens.ts'
import { listSegments } from '../../src/store/wal.ts'
import { LOG_HEADER_BYTES, scanLog } from '../../src/store/log-format.ts'
import { readSnapshot } from '../../src/store/snapshot-file.ts'
import { DATA_FORMAT } from '../../src/store/format.ts'
import { SCHEMA_VERSION } from '../../src/storage/postgres/schema.ts'
import { Store } from '../../src/store/store.ts'
import { recordedTime } from '../../src/store/lock.ts'
import { EmbeddedStorage } from '../../src/storage/embedded/index.ts'
import pkg from '../../package.json'

setDefaultTimeout(15000)

afterEach(killServers)

const newDataDir = () => tempDataDir('keyward-cli-')


function parseInitLine(stdout: string): { organization_id: string; token: string } {
  const lines = stdout.split('\n').filter(Boolean)
  expect(lines).toHaveLength(1)
  const parsed = JSON.parse(lines[0]!)
  expect(Object.keys(parsed).sort()).toEqual(['organization_id', 'token'])
  expect(parsed.organization_id).toMatch(/^[0-9a-f-]{36}$/)
  expect(typeof parsed.token).toBe('string')
  return parsed
}

async function init(data: string): Promise<{ organization_id: string; token: string }> {
  const result = await keyward(['init', '--data', data])
  expect(result.code).toBe(0)
  return parseInitLine(result.stdout)
}

describe('usage', () => {
  test('--help prints the usage on stdout, exit 0', async () => {
    const result = await keyward(['--help'])
    expect(result).toMatchObject({ code: 0, stderr: '' })
    expect(result.stdout).toContain('Usage:')
    for (const command of ['serve', 'init', 'issue-token', 'tokens', 'backup', 'restore', 'verify']) expect(result.stdout).toContain(`keyward ${command}`)
  })

  for (const command of ['serve', 'init', 'issue-token', 'tokens', 'backup', 'restore', 'verify']) {
    test(`${command} --help (or -h, as for the program) prints its usage on stdout, exit 0, and does nothing else`, async () => {
      for (const help of ['--help', '-h']) {
        const data = newDataDir()
        const result = await keyward([command, '--data', data, help])
        expect(result).toMatchObject({ code: 0, stderr: '' })
        expect(result.stdout).toContain(`Usage: keyward ${command}`)
        expect(result.stdout).toContain('--data DIR')
        expect(existsSync(data)).toBe(false)
      }
    })
  }

  test("help COMMAND and --help COMMAND print that command's usage, exit 0", async () => {
    for (const help of ['help', '--help', '-h']) {
      const result = await keyward([help, 'issue-token'])
      expect(result).toMatchObject({ code: 0, stderr: '' })
      expect(result.stdout).toContain('Usage: keyward issue-token')
    }
  })

  test('output to a reader that has gone (| true, | head -1) ends no command in a stack trace: its own exit code', async () => {
    const data = newDataDir()
    expect((await keyward(['init', '--data', data])).code).toBe(0)
    // The reader closes its end at once, before the command writes: every write then fails (EPIPE).
    const intoGoneReader = (args: string[]) => run(['bash', '-c', 'set -o pipefail; "$@" | (exec 0<&-)', 'bash', ...keywardCommand(args)])
    for (const args of [['--help'], ['serve', '-h'], ['--version'], ['tokens', 'list', '--data', data], ['verify', '--data', data]]) {
      const result = await intoGoneReader(args)
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 0, stderr: '' })
    }
  })

  test('a stdout that cannot take the output (a full disk: /dev/full) is exit 1 with one line saying so, and what was done', async () => {
    const data = newDataDir()
    expect((await keyward(['init', '--data', data])).code).toBe(0)
    const intoFullDisk = (args: string[]) => run(['bash', '-c', '"$@" > /dev/full', 'bash', ...keywardCommand(args)])
    const archive = `${data}-backup.tar`
    for (const [args, says] of [
      [['--help'], 'keyward: could not write to stdout (ENOSPC)\n'],
      [['serve', '-h'], 'keyward: could not write to stdout (ENOSPC)\n'],
      [['backup', '--data', data, '--out', archive], `keyward: could not write to stdout (ENOSPC), but the backup was written to ${archive}\n`],
    ] as const) {
      const result = await intoFullDisk([...args])
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 1, stderr: says })
    }
    expect(existsSync(archive)).toBe(true)
  })

  test('--version prints the program version, the data format and the database schema versions, exit 0', async () => {
    expect(await keyward(['--version'])).toEqual({ code: 0, stdout: `keyward ${pkg.version} (data format ${DATA_FORMAT}, database schema ${SCHEMA_VERSION})\n`, stderr: '' })
  })

  test('a secret put where another argument goes (a token, an api_key, a database URL with its password) is not repeated in the message, exit 2', async () => {
    const token = `kw2_${'0123456789abcdef'.repeat(2)}_${'A'.repeat(43)}`
    const apiKey = `kwk_${'b'.repeat(32)}`
    const url = 'postgres://keyward:Sekr1tPassw0rd@127.0.0.1:1/keyward'
    for (const args of [['serve', url], [url], ['issue-token', '--org', crypto.randomUUID(), '--role', token], ['issue-token', '--org', crypto.randomUUID(), '--role', 'viewer', '--ttl', token], ['tokens', 'list', apiKey]]) {
      const result = await keyward([...args, '--data', newDataDir()])
      expect([args[0], result.code, result.stdout]).toEqual([args[0], 2, ''])
      for (const secret of [token.slice(4), apiKey.slice(4), 'Sekr1tPassw0rd']) expect(result.stderr).not.toContain(secret)
      expect(result.stderr).toMatch(/not shown|\*\*\*@/)
    }
  })

  const misuse: [string, string[], RegExp][] = [
    ['an unknown command', ['frobnicate'], /unknown command 'frobnicate'/],
    ["a name every object has (not a command)", ['toString'], /unknown command 'toString'/],
    ['help for a name every object has', ['help', '__proto__'], /unexpected argument '__proto__'/],
    ['no command', [], /no command/],
    ['an unknown flag', ['init', '--frobnicate'], /frobnicate/],
    ['a positional argument', ['serve', 'extra'], /extra/],
    ['a flag without its value', ['serve', '--port'], /port/],
    ['a bad port', ['serve', '--port', 'http'], /invalid --port 'http'/],
    // `--host "$H"` with H unset: bad usage, not a failure to listen that a service manager restarts.
    ['an empty host', ['serve', '--host', ''], /invalid --host ''/],
    ['an empty TLS file', ['serve', '--tls-cert', '', '--tls-key', 'key.pem'], /--tls-cert is empty/],
    // Wherever the unknown flag stands: after --version or --help as after a command's --help.
    ['an unknown flag after --version', ['--version', '--frobnicate'], /unexpected argument '--frobnicate'/],
    ['an unknown flag after --help', ['--help', '--frobnicate'], /unexpected argument '--frobnicate'/],
    ["an unknown flag after a command's --help", ['serve', '--help', '--frobnicate'], /frobnicate/],
  ]
  for (const [name, args, message] of misuse) {
    test(`${name}: usage on stderr, nothing on stdout, exit 2`, async () => {
      const data = newDataDir()
      const result = await keyward(args.length > 0 ? [...args, '--data', data] : [])
      expect(result.code).toBe(2)
      expect(result.stdout).toBe('')
      expect(result.stderr).toMatch(message)
      expect(result.stderr).toContain('Usage:')
      expect(existsSync(data)).toBe(false)
    })
  }
})

describe('init', () => {
  test('prints one JSON line, creates a private data dir; a second init fails with exit 1', async () => {
    const data = newDataDir()
    const first = await keyward(['init', '--data', data, '--vendor-description', 'Acme'])
    expect(first.code).toBe(0)
    parseInitLine(first.stdout)
    expect(statSync(data).mode & 0o777).toBe(0o700)
    for (const name of readdirSync(data)) expect([name, statSync(join(data, name)).mode & 0o777]).toEqual([name, 0o600])
    expect(existsSync(join(data, 'secret'))).toBe(false) // tokens are recorded, not signed: no signing secret
    expect(isDataDirLocked(data)).toBe(false)

    const second = await keyward(['init', '--data', data])
    expect(second.code).toBe(1)
    expect(second.stdout).toBe('')
    expect(second.stderr).toContain('already initialised')
    expect(second.stderr).toContain(data)
  })

  test('a dir that holds only what its first start made: init and every start say how to get a token (its line may never have been shown)', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = parseInitLine((await keyward(['init', '--data', data])).stdout)
    const hint = `nothing has been done here since the first start: if its vendor admin token was never shown (that start was stopped before printing it), issue one with keyward issue-token --data ${data} --org ${vendorId} --role admin`
    expect((await keyward(['init', '--data', data])).stderr).toBe(`keyward: data dir ${data} is already initialised; ${hint}\n`)
    const untouched = await startServer(data)
    expect(await stopServer(untouched, 'SIGTERM')).toBe(0)
    const warning = untouched.stderr.text.split('\n').filter((line) => line.includes('nothing has been done')).map((line) => JSON.parse(line))
    expect(warning.map(({ level, msg }) => ({ level, msg }))).toEqual([{ level: 'warn', msg: hint }])
    // Once anything has been done (here: the token it says to issue), neither says it again.
    expect((await keyward(['issue-token', '--data', data, '--org', vendorId, '--role', 'admin'])).code).toBe(0)
    const again = await keyward(['init', '--data', data])
    expect(again.stderr).toBe(`keyward: data dir ${data} is already initialised\n`)
    const used = await startServer(data)
    expect(await stopServer(used, 'SIGTERM')).toBe(0)
    expect(used.stderr.text).not.toContain('nothing has been done')
  })

  test('the first-start hint is not given once the vendor or its first token has changed (its token was used)', async () => {
    for (const change of ['vendor description', 'token revoked'] as const) {
      const data = newDataDir()
      const first = await startServer(data)
      const { organization_id: vendorId, token } = initLine(first)
      const tokenId = tokenIdOf(token)!
      const changed =
        change === 'vendor description'
          ? await api(first.url, token, 'PATCH', `/api/organizations/${vendorId}`, { description: 'Acme' })
          : await api(first.url, token, 'PATCH', `/api/tokens/${tokenId}/revoke`)
      expect({ change, status: changed.status }).toEqual({ change, status: 200 })
      expect(await stopServer(first, 'SIGTERM')).toBe(0)
      const again = await startServer(data)
      expect(await stopServer(again, 'SIGTERM')).toBe(0)
      expect({ change, hinted: again.stderr.text.includes('nothing has been done') }).toEqual({ change, hinted: false })
    }
  })

  test('a stdout that cannot take the token (a full disk): exit 1 saying what to do, no stack trace; issue-token alike', async () => {
    const data = newDataDir()
    const toFullDisk = (args: string[]) => run(['sh', '-c', 'exec "$@" > /dev/full', 'sh', ...keywardCommand(args)])
    const init = await toFullDisk(['init', '--data', data])
    expect(init.code).toBe(1)
    const vendorId = /--org ([0-9a-f-]{36}) --role admin/.exec(init.stderr)?.[1]
    expect(init.stderr).toBe(`keyward: could not write to stdout (ENOSPC): initialised, but the vendor admin token was not shown: issue one with keyward issue-token --data ${data} --org ${vendorId} --role admin\n`)
    // As it says: the dir is initialised, and a token is issued for that vendor.
    const issued = await keyward(['issue-token', '--data', data, '--org', vendorId!, '--role', 'admin'])
    expect(issued.code).toBe(0)
    const lost = await toFullDisk(['issue-token', '--data', data, '--org', vendorId!, '--role', 'viewer'])
    expect(lost.code).toBe(1)
    const tokenId = /tokens revoke ([0-9a-f-]{36})/.exec(lost.stderr)?.[1]
    expect(lost.stderr).toBe(`keyward: could not write to stdout (ENOSPC): the token ${tokenId} was recorded but not shown: revoke it with keyward tokens revoke ${tokenId} --data ${data}, and issue another\n`)
    expect((await keyward(['tokens', 'revoke', tokenId!, '--data', data])).code).toBe(0)
  })

  test('a closed stdout (Bun opens /dev/null in its place), or one sent to /dev/null: init and issue-token do nothing, exit 1 saying why', async () => {
    const data = newDataDir()
    const init = await keyward(['init', '--data', data])
    const vendorId = JSON.parse(init.stdout).organization_id
    const tokensBefore = (await keyward(['tokens', 'list', '--data', data])).stdout
    for (const redirect of ['>&-', '> /dev/null']) {
      const shell = (args: string[]) => run(['sh', '-c', `exec "$@" ${redirect}`, 'sh', ...keywardCommand(args)])
      const dir = newDataDir()
      const refused = await shell(['init', '--data', dir])
      expect({ redirect, code: refused.code, stderr: refused.stderr }).toEqual({
        redirect,
        code: 1,
        stderr: 'keyward: stdout is /dev/null (closed, or sent there), so it cannot show the vendor admin token: nothing was initialised; send stdout to a terminal, a file or a pipe\n',
      })
      expect(existsSync(dir)).toBe(false)
      const notIssued = await shell(['issue-token', '--data', data, '--org', vendorId, '--role', 'viewer'])
      expect([redirect, notIssued.code, notIssued.stderr]).toEqual([redirect, 1, expect.stringContaining('so it cannot show the token: none was issued')])
    }
    expect((await keyward(['tokens', 'list', '--data', data])).stdout).toBe(tokensBefore)
  })

  test('a first serve whose stdout is /dev/null says the token was not shown, and serves on', async () => {
    const data = newDataDir()
    const server = await startServer(data, { wrap: (command) => ['sh', '-c', 'exec "$@" > /dev/null', 'sh', ...command] })
    expect(server.stderr.text).toContain('stdout is /dev/null (closed, or sent there), so it cannot show a secret: initialised, but the vendor admin token was not shown')
    expect(server.stderr.text).not.toContain('the vendor admin token is on stdout')
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })

  test("--vendor-description follows the API's rule for a description: code points counted, invisible text refused (exit 2)", async () => {
    const emoji = '😀'.repeat(600) // 600 characters, 1,200 UTF-16 units
    const data = newDataDir()
    expect((await keyward(['init', '--data', data, '--vendor-description', emoji])).code).toBe(0)
    for (const bad of ['\u200b', ' ', 'x'.repeat(1025)]) {
      const refused = await keyward(['init', '--data', newDataDir(), '--vendor-description', bad])
      expect([refused.code, refused.stderr]).toEqual([2, expect.stringContaining('--vendor-description must be 1 to 1024 characters')])
    }
  })

  test('KEYWARD_DATA chooses the data dir', async () => {
    const data = newDataDir()
    const result = await keyward(['init'], { KEYWARD_DATA: data })
    expect(result.code).toBe(0)
    expect(readdirSync(data).length).toBeGreaterThan(0)
  })
})

describe('serve', () => {
  test('on an empty dir it initialises and prints the JSON line once; not on the next start', async () => {
    const data = newDataDir()
    const server = await startServer(data)
    await waitFor('the init line', () => server.stdout.text.includes('\n'), server.proc)
    const { organization_id: vendorId, token } = parseInitLine(server.stdout.text)
    const health = await fetch(`${server.url}/healthz`)
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }])
    const own = await api(server.url, token, 'GET', `/api/organizations/${vendorId}`)
    expect(own.status).toBe(200)
    expect(own.body.organization.organization_id).toBe(vendorId)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    parseInitLine(server.stdout.text) // still exactly one line

    const again = await startServer(data)
    expect((await api(again.url, token, 'GET', `/api/organizations/${vendorId}`)).status).toBe(200)
    expect(await stopServer(again, 'SIGTERM')).toBe(0)
    expect(again.stdout.text).toBe('')
  })

  test('SIGTERM, SIGINT and SIGHUP: exit 0, a snapshot holding everything, the lock released', async () => {
    const data = newDataDir()
    const { organization_id: vendorId, token } = await init(data)
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
      const server = await startServer(data)
      const created = await api(server.url, token, 'POST', '/api/organizations', { description: `via ${signal}`, parent_id: vendorId })
      expect(created.status).toBe(201)
      expect(await stopServer(server, signal)).toBe(0)
      expect(server.stderr.text).toContain('stopped')
      expect(isDataDirLocked(data)).toBe(false)
      const snapshot = (await readSnapshot(join(data, 'snapshot.json')))!
      const ids = (snapshot.tables.organizations as { organization_id: string }[]).map((o) => o.organization_id)
      expect(ids).toContain(created.body.organization.organization_id)
      expect(statSync(join(data, 'snapshot.json')).mode & 0o777).toBe(0o600)
    }
  })

  test('SIGHUP ignored when started (nohup): it stays ignored, the server serves on', async () => {
    const data = newDataDir()
    await init(data)
    const server = await startServer(data, { wrap: (command) => ['nohup', ...command] })
    server.proc.kill('SIGHUP')
    // A request sent after the signal, answered: had it stopped, the connection would be refused.
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
    expect(server.proc.exitCode).toBeNull()
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    expect(server.stderr.text).not.toContain('SIGHUP')
  })

  test('SIGTERM with writes in flight: exit 0, and every acknowledged write survives', async () => {
    const data = newDataDir()
    const { organization_id: vendorId, token } = await init(data)
    const server = await startServer(data)
    let answered!: () => void
    const firstAnswer = new Promise<void>((resolve) => (answered = resolve))
    const posts = Array.from({ length: 40 }, (_, i) =>
      api(server.url, token, 'POST', '/api/organizations', { description: `in flight ${i}`, parent_id: vendorId }).finally(() => answered()),
    )
    await firstAnswer
    server.proc.kill('SIGTERM')
    const results = await Promise.allSettled(posts)
    expect(await stopServer(server, null)).toBe(0)
    const acknowledged = results.flatMap((r) => (r.status === 'fulfilled' && r.value.status === 201 ? [r.value.body.organization.organization_id as string] : []))
    expect(acknowledged.length).toBeGreaterThan(0)
    // Anything else was refused or cut off, never answered with another status.
    for (const r of results) if (r.status === 'fulfilled') expect(r.value.status).toBe(201)

    const restarted = await startServer(data)
    const listed = (await api(restarted.url, token, 'GET', '/api/organizations')).body.organizations.map((o: { organization_id: string }) => o.organization_id)
    for (const id of acknowledged) expect(listed).toContain(id)
    expect(await stopServer(restarted, 'SIGTERM')).toBe(0)
  })

  test('a repeated SIGTERM during shutdown does not cut it short', async () => {
    const data = newDataDir()
    const { organization_id: vendorId, token } = await init(data)
    const server = await startServer(data)
    const posts = Array.from({ length: 20 }, (_, i) => api(server.url, token, 'POST', '/api/organizations', { description: `o${i}`, parent_id: vendorId }))
    await posts[0]
    server.proc.kill('SIGTERM')
    await waitFor('the shutdown to begin', () => server.stderr.text.includes('finishing requests'), server.proc)
    server.proc.kill('SIGTERM')
    server.proc.kill('SIGINT')
    await Promise.allSettled(posts)
    expect(await stopServer(server, null)).toBe(0)
    expect(server.stderr.text).toContain('stopped')
    expect(existsSync(join(data, 'snapshot.json'))).toBe(true)
  })

  test('a stop waits --stop-timeout at most for an answer its client does not read, then closes that connection and stops: exit 0', async () => {
    const data = newDataDir()
    const { organization_id: vendorId, token } = await init(data)
    // 6,000 customers with long descriptions, written through the storage as a server would: the
    // organization list (answered whole) is some 7 MB, more than the sockets' buffers hold.
    const storage = new EmbeddedStorage(await Store.open(data))
    await storage.transaction(async (tx) => {
      for (let i = 0; i < 6000; i++) {
        await tx.insert('organizations', { organization_id: crypto.randomUUID(), parent_id: vendorId, organization_type: 'customer', description: `${i} ${'x'.repeat(1000)}`, state: 'active', environments: null })
      }
    })
    await storage.close()
    const server = await startServer(data, { env: { KEYWARD_STOP_TIMEOUT: '1s' } })
    // A client that stops reading at the answer's first bytes: the rest stays in flight.
    let received = 0
    const socket = await Bun.connect({
      hostname: '127.0.0.1',
      port: Number(new URL(server.url).port),
      socket: {
        data: (client, chunk) => {
          received += chunk.length
          client.pause()
        },
      },
    })
    socket.write(`GET /api/organizations HTTP/1.1\r\nhost: keyward\r\nauthorization: Bearer ${token}\r\n\r\n`)
    await waitFor('the answer to start', () => received > 0)
    server.proc.kill('SIGTERM')
    expect(await stopServer(server, null)).toBe(0)
    const lines = server.stderr.text.split('\n').filter(Boolean).map((line) => JSON.parse(line))
    expect(lines.filter((line) => line.level === 'warn').map((line) => line.msg)).toContain('stop: answers still in flight after 1 s (--stop-timeout): their connections are closed')
    expect(lines.at(-1)!.msg).toBe('stopped')
    socket.end()
  })

  test("a running server notes its clock's time in serve.lock every few seconds, not only when it stops (docs/storage.md \"Embedded\")", async () => {
    const data = newDataDir()
    await init(data)
    const before = recordedTime(data)
    const server = await startServer(data)
    await waitFor('a note newer than the one init left', () => recordedTime(data) > before, server.proc)
    expect(server.proc.exitCode).toBeNull() // noted while serving
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })

  test('a second serve on the same dir exits 1 at once; the first keeps serving', async () => {
    const data = newDataDir()
    const first = await startServer(data)
    const second = await keyward(['serve', '--data', data, '--port', '0'])
    expect(second.code).toBe(1)
    expect(second.stdout).toBe('')
    expect(second.stderr).toContain(`data dir ${data} is already in use`)
    expect((await fetch(`${first.url}/healthz`)).status).toBe(200)
    expect(isDataDirLocked(data)).toBe(true) // the loser did not take the winner's lock away
    expect(await stopServer(first, 'SIGTERM')).toBe(0)
  })

  test('a port already taken: exit 1 with a message, and the data dir is left unlocked', async () => {
    const data = newDataDir()
    await init(data)
    const blocker = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response('') })
    try {
      const result = await keyward(['serve', '--data', data, '--port', String(blocker.port)])
      expect(result.code).toBe(1)
      expect(result.stderr).toContain(`cannot listen on 127.0.0.1:${blocker.port}: port ${blocker.port} is already in use`)
      expect(isDataDirLocked(data)).toBe(false)
    } finally {
      blocker.stop(true)
    }
  })

  test('kill -9 after acknowledged writes: the lock is free at once, and a restart has them all', async () => {
    const data = newDataDir()
    const { organization_id: vendorId, token } = await init(data)
    const server = await startServer(data)
    const created = await Promise.all(
      Array.from({ length: 8 }, (_, i) => api(server.url, token, 'POST', '/api/organizations', { description: `customer ${i}`, parent_id: vendorId })),
    )
    for (const response of created) expect(response.status).toBe(201)
    const ids = created.map((r) => r.body.organization.organization_id as string)
    // An update acknowledged just before the kill.
    expect((await api(server.url, token, 'PATCH', `/api/organizations/${ids[0]}`, { description: 'renamed' })).status).toBe(200)
    expect(await stopServer(server, 'SIGKILL')).toBe(-9)
    expect(isDataDirLocked(data)).toBe(false)

    const restarted = await startServer(data)
    const list = await api(restarted.url, token, 'GET', '/api/organizations')
    expect(list.status).toBe(200)
    const listed = (list.body.organizations as { organization_id: string; description: string }[]).map((o) => o.organization_id)
    for (const id of ids) expect(listed).toContain(id)
    expect((await api(restarted.url, token, 'GET', `/api/organizations/${ids[0]}`)).body.organization.description).toBe('renamed')
    expect(restarted.stdout.text).toBe('') // not initialised a second time
    expect(await stopServer(restarted, 'SIGTERM')).toBe(0)
  })

  test('a damaged log: exit 1 with a message naming the file and offset; nothing repaired', async () => {
    const data = newDataDir()
    const { organization_id: vendorId, token } = await init(data)
    const server = await startServer(data)
    for (let i = 0; i < 4; i++) {
      expect((await api(server.url, token, 'POST', '/api/organizations', { description: `c${i}`, parent_id: vendorId })).status).toBe(201)
    }
    await stopServer(server, 'SIGKILL')

    const segments = await listSegments(data)
    const segment = segments[segments.length - 1]!.path
    const bytes = readFileSync(segment)
    const { payloads } = scanLog(bytes, segment)
    expect(payloads.length).toBeGreaterThanOrEqual(3)
    const second = LOG_HEADER_BYTES + payloads[0]!.length // where the second record starts
    const at = second + LOG_HEADER_BYTES + 10
    bytes[at] = bytes[at]! ^ 0x20
    writeFileSync(segment, bytes)

    const result = await keyward(['serve', '--data', data, '--port', '0'])
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toContain(segment)
    expect(result.stderr).toContain(`offset ${second}`)
    expect(result.stderr).not.toContain('listening')
    expect(readFileSync(segment)).toEqual(bytes)
    expect(isDataDirLocked(data)).toBe(false)
  })
})

describe('issue-token', () => {
  test('beside a running server: one token on stdout, accepted by the server', async () => {
    const data = newDataDir()
    const server = await startServer(data)
    await waitFor('the init line', () => server.stdout.text.includes('\n'), server.proc)
    const { organization_id: vendorId, token: admin } = parseInitLine(server.stdout.text)
    const customer = await api(server.url, admin, 'POST', '/api/organizations', { description: 'Customer', parent_id: vendorId })
    expect(customer.status).toBe(201)
    const customerId = customer.body.organization.organization_id as string

    for (const [org, role] of [
      [customerId, 'viewer'],
      [vendorId, 'administrator'],
      [customerId.toUpperCase(), 'application_admin'],
    ] as const) {
      const result = await keyward(['issue-token', '--data', data, '--org', org, '--role', role, '--ttl', '30m'])
      expect(result.code).toBe(0)
      expect(result.stderr).toBe('')
      expect(result.stdout).toMatch(/^\S+\n$/)
      const token = result.stdout.trim()
      const seen = await api(server.url, token, 'GET', `/api/organizations/${org.toLowerCase()}`)
      expect(seen.status).toBe(200)
    }
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })

  const refusals: [string, (org: string) => string[], RegExp][] = [
    ['an unknown organization', () => ['--org', '00000000-0000-4000-8000-000000000000', '--role', 'admin'], /unknown organization/],
    ['an unknown role', (org) => ['--org', org, '--role', 'root'], /unknown role 'root'/],
    ['a missing --org', () => ['--role', 'admin'], /--org is required/],
    ['a missing --role', (org) => ['--org', org], /--role is required/],
    ['a bad --ttl', (org) => ['--org', org, '--role', 'admin', '--ttl', '10 days'], /invalid --ttl '10 days': it must be a number and s, m, h or d, like 90d/],
    ['a --ttl without a unit', (org) => ['--org', org, '--role', 'admin', '--ttl', '90'], /invalid --ttl '90': it must be a number and s, m, h or d/],
    ['a zero --ttl', (org) => ['--org', org, '--role', 'admin', '--ttl', '0d'], /invalid --ttl '0d': it must be more than zero/],
    ['a --ttl of ten digits', (org) => ['--org', org, '--role', 'admin', '--ttl', '9999999999s'], /invalid --ttl '9999999999s': it must be at most 366d/],
    ['a small --ttl of ten digits', (org) => ['--org', org, '--role', 'admin', '--ttl', '0000000001d'], /invalid --ttl '0000000001d': it must be a number of at most nine digits/],
    ['a --ttl over 366 days', (org) => ['--org', org, '--role', 'admin', '--ttl', '367d'], /at most 366d/],
    ['an empty --description', (org) => ['--org', org, '--role', 'admin', '--description', ' '], /--description/],
  ]
  test('--ttl 366d, the longest a token lives, is issued: it expires 366 days after it was made', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = await init(data)
    const issued = await keyward(['issue-token', '--data', data, '--org', vendorId, '--role', 'viewer', '--ttl', '366d'])
    expect([issued.code, issued.stderr]).toEqual([0, ''])
    const listed = (await keyward(['tokens', 'list', '--data', data])).stdout.trim().split('\n').map((line) => JSON.parse(line))
    const token = listed.find((t: { role: string }) => t.role === 'viewer')
    expect(Date.parse(token.expires) - Date.parse(token.created)).toBe(366 * 86_400_000)
  })

  test('refusals: message on stderr, nothing on stdout, exit 2', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = await init(data)
    await Promise.all(
      refusals.map(async ([name, args, message]) => {
        const result = await keyward(['issue-token', '--data', data, ...args(vendorId)])
        expect([name, result.code, result.stdout]).toEqual([name, 2, ''])
        expect(result.stderr).toMatch(message)
      }),
    )
  })

  test('an uninitialised data dir: exit 1 with a message', async () => {
    const data = newDataDir()
    const result = await keyward(['issue-token', '--data', data, '--org', 'x', '--role', 'admin'])
    expect(result.code).toBe(1)
    expect(result.stdout).toBe('')
    expect(result.stderr).toContain('not initialised')
  })
})
