/**
 * The token commands of the CLI as processes (docs/api.md "Tokens"; README "Tokens"): on a data dir no
 * server holds, and beside a running server under concurrent writes, where the server records the
 * change through its control socket: the new token works at once, the revoked one is 401 before the
 * command exits, and nothing is lost after kill -9 and a restart. Audit retention of `serve`.
 */
import { afterEach, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { createHmac, randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { timestampMicros } from '../support/fixtures.ts'
import { tempDataDir, tempDir } from '../support/temp-dirs'
import { writeSnapshot } from '../../src/store/snapshot-file.ts'
import { acquireDataDirLock, noteOf } from '../../src/store/lock.ts'
import { newToken, tokenIdOf } from '../../src/auth/tokens.ts'
import { runOnDataDir } from '../../src/cli/data-dir.ts'
import { sendControlCommand } from '../../src/cli/control-socket.ts'
import { api, initLine, isDataDirLocked, keyward, killServers, startServer, stopServer, waitFor, type ServerProcess } from '../support/server-process.ts'

setDefaultTimeout(30000)

afterEach(killServers)

const newDataDir = () => tempDataDir('keyward-tokens-cli-')


async function issue(data: string, org: string, role = 'admin', extra: string[] = []): Promise<string> {
  const result = await keyward(['issue-token', '--data', data, '--org', org, '--role', role, ...extra])
  expect([result.code, result.stderr]).toEqual([0, ''])
  expect(result.stdout).toMatch(/^kw2_[0-9a-f]{32}_[A-Za-z0-9_-]{43}\n$/)
  return result.stdout.trim()
}

async function tokensList(data: string, ...args: string[]): Promise<Record<string, unknown>[]> {
  const result = await keyward(['tokens', 'list', '--data', data, ...args])
  expect([result.code, result.stderr]).toEqual([0, ''])
  return result.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line))
}

const idOf = (token: string) => tokenIdOf(token)!

describe('on a data dir no server holds', () => {
  test('issue-token records the token; tokens list shows it (no secret); tokens revoke revokes it; a server then agrees', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    const token = await issue(data, vendorId, 'viewer', ['--ttl', '2h', '--description', 'nightly export'])
    const listed = await tokensList(data)
    expect(listed).toHaveLength(2) // init's admin token, and this one
    expect(listed[1]).toEqual({
      token_id: idOf(token),
      organization_id: vendorId,
      role: 'viewer',
      description: 'nightly export',
      state: 'active',
      created: expect.any(String),
      expires: expect.any(String),
    })
    // `expires` is `created` plus the ttl to the microsecond: 90 days for init's, 2 hours here.
    expect(listed.map((t) => timestampMicros(t.expires as string) - timestampMicros(t.created as string))).toEqual([90 * 86400e6, 2 * 3600e6])
    expect(JSON.stringify(listed)).not.toContain('kw2_')
    expect(JSON.stringify(listed)).not.toContain('hash')
    expect(await tokensList(data, '--org', vendorId)).toEqual(listed)

    const revoked = await keyward(['tokens', 'revoke', idOf(token).toUpperCase(), '--data', data])
    expect(revoked).toEqual({ code: 0, stdout: '', stderr: '' })
    expect((await tokensList(data))[1]!.state).toBe('revoked')
    const again = await keyward(['tokens', 'revoke', idOf(token), '--data', data])
    expect(again.code).toBe(0)
    expect(again.stderr).toContain('already revoked')
    expect(isDataDirLocked(data)).toBe(false) // the CLI's lock was released

    const server = await startServer(data)
    expect((await api(server.url, token, 'GET', '/api/organizations')).status).toBe(401)
    const fresh = await issue(data, vendorId, 'viewer') // now through the server
    expect((await api(server.url, fresh, 'GET', '/api/organizations')).status).toBe(200)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })

  test("the clock goes on from the time the dir's last holder noted (docs/storage.md \"Embedded\"): a token expired then stays expired, whatever the newest stored time", async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    await issue(data, vendorId, 'viewer', ['--ttl', '1h'])
    // As a server leaves it that ran on for two hours after the last write (then a restart with the
    // system clock set back would take the clock from the newest stored time, and revive the token).
    writeFileSync(join(data, 'serve.lock'), noteOf(Date.now() * 1000 + 2 * 3600 * 1_000_000))
    expect((await tokensList(data)).map((token) => token.state).sort()).toEqual(['active', 'expired'])
  })

  test('tokens list answers an active token past its expiry as expired, as the API does', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    const token = await issue(data, vendorId, 'viewer', ['--ttl', '1h'])
    const expires = timestampMicros((await tokensList(data)).find((t) => t.token_id === idOf(token))!.expires as string)
    expect((await tokensList(data)).map((t) => t.state)).toEqual(['active', 'active'])
    // Time passing, as the store's clock reads it (the note a server leaves in serve.lock), without waiting for it.
    writeFileSync(join(data, 'serve.lock'), noteOf(expires + 1_000_000))
    expect((await tokensList(data)).map((t) => t.state)).toEqual(['active', 'expired'])
  })

  test('refusals: an unknown token or organization, a bad subcommand: exit 2; no data dir: exit 1', async () => {
    const data = newDataDir()
    await keyward(['init', '--data', data])
    for (const args of [
      ['tokens', 'revoke', crypto.randomUUID(), '--data', data],
      ['tokens', 'revoke', 'not-an-id', '--data', data],
      ['tokens', 'revoke', '--data', data],
      ['tokens', 'list', '--org', crypto.randomUUID(), '--data', data],
      ['tokens', 'frobnicate', '--data', data],
      ['tokens', '--data', data],
    ]) {
      const result = await keyward(args)
      expect([args.join(' '), result.code, result.stdout]).toEqual([args.join(' '), 2, ''])
    }
    const missing = await keyward(['tokens', 'list', '--data', join(data, 'nope')])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('not initialised')
    expect(existsSync(join(data, 'nope'))).toBe(false)
  })

  test("a token's secret given where an id goes: unknown, exit 2, and never echoed; beside a running server too", async () => {
    const data = newDataDir()
    const { token: secret } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    const mistakes = [
      ['tokens', 'revoke', secret, '--data', data],
      ['issue-token', '--org', secret, '--role', 'admin', '--data', data],
      ['tokens', 'list', '--org', secret, '--data', data],
      // Longer than any id the control socket takes.
      ['tokens', 'revoke', `${secret} ${secret} ${secret} ${secret}`, '--data', data],
    ]
    const refusedAlone = await Promise.all(mistakes.map((args) => keyward(args)))
    const server = await startServer(data)
    const refusedBeside = await Promise.all(mistakes.map((args) => keyward(args)))
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    for (const [i, result] of [...refusedAlone, ...refusedBeside].entries()) {
      expect({ i, code: result.code, stdout: result.stdout }).toEqual({ i, code: 2, stdout: '' })
      // The token itself for revoke: named by its id, which is what to give (README "Tokens").
      expect(result.stderr).toMatch(i % 4 === 0 ? `that is a token, not a TOKEN_ID: its token_id is ${tokenIdOf(secret)}` : /unknown (token|organization): the id given is not a UUID/)
      expect(result.stderr.toLowerCase()).not.toContain(secret.slice(4).toLowerCase())
    }
  })

  test('tokens revoke takes the token_id as the token string carries it, 32 hex digits without dashes', async () => {
    const data = newDataDir()
    const { organization_id: vendor } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    const tokenId = idOf(await issue(data, vendor, 'viewer'))
    expect(await keyward(['tokens', 'revoke', tokenId.replaceAll('-', '').toUpperCase(), '--data', data])).toMatchObject({ code: 0 })
    expect((await tokensList(data)).find((token) => token.token_id === tokenId)?.state).toBe('revoked')
  })
})

/** Clients creating consumers one after the other until stopped; the ids the server acknowledged. */
function writeLoad(server: ServerProcess, token: string, customer: string, clients: number) {
  const acknowledged: string[] = []
  let stopped = false
  const done = Promise.all(
    Array.from({ length: clients }, async () => {
      while (!stopped) {
        const id = crypto.randomUUID()
        const res = await api(server.url, token, 'POST', '/api/consumers', { consumer_id: id, organization_id: customer }).catch(() => null)
        if (!res) return // the server was killed
        expect(res.status).toBe(201)
        acknowledged.push(id)
      }
    }),
  )
  return { acknowledged, stop: () => ((stopped = true), done), done }
}

/** Whether this run may bind-mount (as root, with mount(8)): for a data dir on a read-only file system. */
function canMountReadOnly(): boolean {
  const probe = tempDir('keyward-mount-probe-')
  const mounted = Bun.spawnSync(['mount', '--bind', probe, probe], { stderr: 'ignore' }).exitCode === 0
  if (mounted) Bun.spawnSync(['umount', probe])
  return mounted
}

describe.skipIf(!canMountReadOnly())('on a read-only file system', () => {
  test('tokens list reads the dir; the commands that write refuse it saying so (exit 1), and write nothing', async () => {
    const data = newDataDir()
    const init = await keyward(['init', '--data', data])
    const vendorId = JSON.parse(init.stdout).organization_id
    const readOnly = join(tempDir('keyward-ro-'), 'data')
    mkdirSync(readOnly)
    expect(Bun.spawnSync(['mount', '--bind', data, readOnly]).exitCode).toBe(0)
    try {
      expect(Bun.spawnSync(['mount', '-o', 'remount,bind,ro', readOnly]).exitCode).toBe(0)
      expect((await tokensList(readOnly)).map((token) => token.organization_id)).toEqual([vendorId])
      const refusal = `keyward: data dir ${readOnly} is on a read-only file system (EROFS): only verify, backup and tokens list can read it there; serve, init, restore and the token commands that write need it writable\n`
      for (const args of [['issue-token', '--org', vendorId, '--role', 'admin'], ['tokens', 'revoke', crypto.randomUUID()]]) {
        expect(await keyward([...args, '--data', readOnly])).toMatchObject({ code: 1, stdout: '', stderr: refusal })
      }
    } finally {
      Bun.spawnSync(['umount', readOnly])
    }
    expect(await tokensList(data)).toHaveLength(1)
  })
})

describe('beside a server that is stopping', () => {
  /**
   * A stand-in for a stopping server: it holds `data` and resets the connection that comes, as it
   * opens or once it has the command; `release` then lets the dir go.
   */
  function serverGoingWithCommand(data: string, release: boolean, at: 'open' | 'data' = 'data') {
    const lock = acquireDataDirLock(data)
    let connections = 0
    const go = (socket: { terminate(): void }) => {
      connections++
      socket.terminate()
      listener.stop(true)
      if (release) lock.release()
    }
    const listener = Bun.listen({ unix: join(data, 'control.sock'), socket: at === 'open' ? { open: go, data() {} } : { data: go } })
    return { commands: () => connections, close: () => (listener.stop(true), lock.release()) }
  }

  test('a control connection closed unanswered: the command is sent again, then done by the CLI once the dir is free; one token recorded', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    const going = serverGoingWithCommand(data, true, 'open')
    try {
      const token = await issue(data, vendorId, 'viewer')
      expect(going.commands()).toBe(1)
      expect((await tokensList(data)).map((t) => t.token_id)).toContain(tokenIdOf(token))
      expect(await tokensList(data)).toHaveLength(2)
    } finally {
      going.close()
    }
  })

  test('a server that had the command and went without answering, the dir still held: the failure says the outcome is unknown and names the token (review, 2026-11-30)', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    const going = serverGoingWithCommand(data, false)
    const { tokenId, tokenHash } = newToken()
    const command = { command: 'issue-token', organization_id: vendorId, role: 'viewer', ttl_seconds: 60, description: null, token_id: tokenId, token_hash: tokenHash } as const
    try {
      const failure = await runOnDataDir(data, command, { deadlineMs: 200, answerTimeoutMs: undefined }).catch((error: Error) => error)
      expect(going.commands()).toBe(1)
      expect((failure as Error).message).toContain(`a server had the command and went without answering, so it may have been done: check with keyward tokens list --data ${data} whether token ${tokenId} was recorded`)
    } finally {
      going.close()
    }
  })

  test('a revocation sent again after a server went without answering, found revoked: said revoked, not "already revoked" (it may have been this command)', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    const token = await issue(data, vendorId, 'viewer')
    // What the first sending did before its server went: revoked (here by another command).
    expect((await keyward(['tokens', 'revoke', idOf(token), '--data', data])).code).toBe(0)
    const going = serverGoingWithCommand(data, true)
    try {
      const revoked = await keyward(['tokens', 'revoke', idOf(token), '--data', data])
      expect(going.commands()).toBe(1)
      expect([revoked.code, revoked.stderr]).toEqual([0, ''])
    } finally {
      going.close()
    }
  })

  test('a server that does not answer in time (stopped): the failure names the token the command was about', async () => {
    const data = newDataDir()
    const { organization_id: vendorId } = JSON.parse((await keyward(['init', '--data', data])).stdout)
    const lock = acquireDataDirLock(data)
    const listener = Bun.listen({ unix: join(data, 'control.sock'), socket: { data() {} } })
    const { tokenId, tokenHash } = newToken()
    try {
      const failure = await sendControlCommand(data, { command: 'issue-token', organization_id: vendorId, role: 'viewer', ttl_seconds: 60, description: null, token_id: tokenId, token_hash: tokenHash }, 100).catch((error: Error) => error)
      expect((failure as Error).message).toContain(`whether token ${tokenId} was recorded (if it was, revoke it: its secret was never shown)`)
      // A list changes nothing: its failure says no outcome is unknown.
      const listed = await sendControlCommand(data, { command: 'tokens list', organization_id: null }, 100).catch((error: Error) => error)
      expect((listed as Error).message).toContain('did not answer on its control socket within 0.1 s (is it stopped or stuck?)')
      expect((listed as Error).message).not.toContain('may or may not')
    } finally {
      listener.stop(true)
      lock.release()
    }
  })
})

describe('beside a running server', () => {
  test('a data dir whose path is too long for a socket (over 107 bytes): its control socket is reached through the dir', async () => {
    const data = join(newDataDir(), 'a-path-long-enough-that-its-control-socket-would-pass-the-kernel-limit-of-one-hundred-and-seven-bytes')
    expect(Buffer.byteLength(join(data, 'control.sock'))).toBeGreaterThan(107)
    const server = await startServer(data)
    const { organization_id: vendorId } = initLine(server)
    expect(server.stderr.text).not.toContain('no control socket')
    expect(statSync(join(data, 'control.sock')).mode & 0o777).toBe(0o600)
    const token = await issue(data, vendorId, 'viewer')
    expect((await api(server.url, token, 'GET', `/api/organizations/${vendorId}`)).status).toBe(200)
    expect(await keyward(['tokens', 'revoke', idOf(token), '--data', data])).toEqual({ code: 0, stdout: '', stderr: '' })
    expect((await api(server.url, token, 'GET', `/api/organizations/${vendorId}`)).status).toBe(401)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })
})

describe('the control socket at a stop, and in the way', () => {
  test('a connection to the control socket that never ends holds a stop no longer than --stop-timeout, as an API connection', async () => {
    const data = newDataDir()
    const server = await startServer(data, { env: { KEYWARD_STOP_TIMEOUT: '1s' } })
    // A command whose header never ends: a byte every 50 ms keeps the connection busy (Bun's idle
    // timeout never comes), which held the stop until the header limit, minutes later.
    const socket = await Bun.connect({ unix: join(data, 'control.sock'), socket: { data() {} } })
    socket.write('POST /control HTTP/1.1\r\nHost: keyward\r\n')
    const drip = setInterval(() => socket.write('x'), 50)
    try {
      expect(await stopServer(server, 'SIGTERM')).toBe(0)
      expect(server.stderr.text).toContain('stop: control socket connections still open after 1 s (--stop-timeout): they are closed')
    } finally {
      clearInterval(drip)
      socket.end()
    }
  })

  test('a directory where the control socket goes: serve exits 1 saying to remove it', async () => {
    const data = newDataDir()
    expect((await keyward(['init', '--data', data])).code).toBe(0)
    mkdirSync(join(data, 'control.sock'))
    const result = await keyward(['serve', '--data', data, '--port', '0', '--rate-limit', '0'])
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`${join(data, 'control.sock')} is a directory: keyward makes its control socket there; remove it`)
  })
})

describe('beside a running server, under concurrent writes', () => {
  test('the new token works at once; the revoked one is 401 before the command exits; kill -9 and restart lose nothing', async () => {
    const data = newDataDir()
    let server = await startServer(data)
    const { organization_id: vendorId, token: vendor } = initLine(server)
    expect(statSync(join(data, 'control.sock')).mode & 0o777).toBe(0o600)
    const customer = (await api(server.url, vendor, 'POST', '/api/organizations', { description: 'Busy', parent_id: vendorId })).body.organization.organization_id
    const load = writeLoad(server, vendor, customer, 8)
    await waitFor('some writes', () => load.acknowledged.length >= 20)

    const issued: string[] = []
    for (const [org, role] of [[customer, 'admin'], [vendorId, 'viewer'], [customer, 'viewer']] as const) {
      const token = await issue(data, org, role, ['--description', `beside the server (${role})`])
      // At once: the server recorded it before the command printed it.
      expect((await api(server.url, token, 'GET', `/api/organizations/${org}`)).status).toBe(200)
      issued.push(token)
    }
    const listed = await tokensList(data, '--org', customer)
    expect(listed.map((t) => t.token_id)).toEqual([idOf(issued[0]!), idOf(issued[2]!)])

    const revoke = await keyward(['tokens', 'revoke', idOf(issued[0]!), '--data', data])
    expect(revoke).toEqual({ code: 0, stdout: '', stderr: '' })
    // Taken effect before the command exited: the very next request is refused.
    expect((await api(server.url, issued[0]!, 'GET', `/api/organizations/${customer}`)).status).toBe(401)
    expect((await api(server.url, issued[2]!, 'GET', `/api/organizations/${customer}`)).status).toBe(200)
    await waitFor('more writes', () => load.acknowledged.length >= 60)

    // The server's events name the commands that made the changes.
    const events = (await api(server.url, vendor, 'GET', `/api/audit-events?target_ids=${issued.map(idOf).join(',')}`)).body.audit_events
    expect(events.map((e: { action: string; actor: unknown; trace_id: unknown }) => [e.action, e.actor, e.trace_id])).toEqual([
      ['token.create', { cli: 'issue-token' }, null],
      ['token.create', { cli: 'issue-token' }, null],
      ['token.create', { cli: 'issue-token' }, null],
      ['token.revoke', { cli: 'tokens revoke' }, null],
    ])

    // kill -9 under load, restart: every acknowledged write, the tokens and the revocation are there.
    expect(await stopServer(server, 'SIGKILL')).toBe(-9)
    await load.done
    server = await startServer(data) // a stale control socket is replaced
    expect((await api(server.url, issued[0]!, 'GET', '/api/organizations')).status).toBe(401)
    expect((await api(server.url, issued[1]!, 'GET', '/api/organizations')).status).toBe(200)
    const stored = new Set<string>()
    for (let page = 1; stored.size === (page - 1) * 1000; page++) {
      const answer = (await api(server.url, vendor, 'GET', `/api/consumers?organization_ids=${customer}&page=${page}&page_size=1000`)).body
      for (const c of answer.consumers) stored.add(c.consumer_id)
    }
    expect(load.acknowledged.filter((id) => !stored.has(id))).toEqual([])
    const created = (await api(server.url, vendor, 'GET', `/api/audit-events?customer_ids=${customer}&actions=consumer.create&page_size=1`)).body.total
    expect(created).toBe(stored.size) // one event per consumer, no more, no fewer
    expect((await tokensList(data, '--org', customer)).map((t) => t.state)).toEqual(['revoked', 'active'])
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
    expect(existsSync(join(data, 'control.sock'))).toBe(false)
  })
})

describe('upgrading a data dir of the version with signed tokens', () => {
  test('it opens; its kw1 tokens are 401; its secret is ignored; new tokens are issued with the CLI', async () => {
    const data = newDataDir()
    mkdirSync(data, { recursive: true, mode: 0o700 })
    // As that version left it after a graceful stop: a snapshot of its six tables and the secret.
    const vendorId = crypto.randomUUID()
    const now = Date.now() * 1000
    const vendor = { organization_id: vendorId, parent_id: null, organization_type: 'vendor', description: 'Vendor', state: 'active', environments: null, created: now, modified: now }
    await writeSnapshot(join(data, 'snapshot.json'), { format: 1, lsn: 1, meta: {}, tables: { organizations: [vendor], applications: [], consumers: [], installations: [], enrollments: [], keysets: [] } })
    const secret = randomBytes(32)
    writeFileSync(join(data, 'secret'), `${secret.toString('hex')}\n`, { mode: 0o600 })
    const claims = Buffer.from(JSON.stringify({ org: vendorId, role: 'admin', exp: 4e9, nonce: 'x' })).toString('base64url')
    const oldToken = `kw1.${claims}.${createHmac('sha256', secret).update('kw1.').update(claims).digest('base64url')}`

    const server = await startServer(data)
    expect(server.stdout.text).toBe('') // not initialised again
    expect((await api(server.url, oldToken, 'GET', '/api/organizations')).status).toBe(401)
    const token = await issue(data, vendorId, 'admin')
    const orgs = await api(server.url, token, 'GET', '/api/organizations')
    expect([orgs.status, orgs.body.organizations.map((o: { organization_id: string }) => o.organization_id)]).toEqual([200, [vendorId]])
    expect((await tokensList(data)).map((t) => t.token_id)).toEqual([idOf(token)])
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })
})

describe('audit retention', () => {
  test('serve --audit-retention drops older events in the background; they stay dropped after a restart', async () => {
    const data = newDataDir()
    let server = await startServer(data, { env: { KEYWARD_AUDIT_RETENTION: '1d' } })
    const { organization_id: vendorId, token } = initLine(server)
    for (let n = 0; n < 5; n++) await api(server.url, token, 'POST', '/api/organizations', { description: `c${n}`, parent_id: vendorId })
    const count = async () => (await api(server.url, token, 'GET', '/api/audit-events?page_size=1')).body.total as number
    expect(await count()).toBe(7) // vendor.init, token.create, five organization.create
    expect(await stopServer(server, 'SIGTERM')).toBe(0)

    // Kept a second, and the store's clock a minute on (the note a server leaves in serve.lock: time
    // passing, without waiting for it): the server drops them by itself, in its first pass.
    writeFileSync(join(data, 'serve.lock'), noteOf(Date.now() * 1000 + 60_000_000))
    server = await startServer(data, { env: { KEYWARD_AUDIT_RETENTION: '1s' } })
    expect(server.stderr.text).toContain('"audit_retention_seconds":1')
    await waitFor('the retention pass', () => /audit retention: dropped 7 event/.test(server.stderr.text), server.proc)
    expect(await count()).toBe(0)
    expect(await stopServer(server, 'SIGKILL')).toBe(-9)
    server = await startServer(data) // the default, 400 days: nothing to drop, nothing back
    expect(server.stderr.text).toContain(`"audit_retention_seconds":${400 * 86400}`)
    expect(await count()).toBe(0)
    expect((await api(server.url, token, 'GET', '/api/organizations')).body.organizations).toHaveLength(6)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })

  test('--audit-retention takes precedence over KEYWARD_AUDIT_RETENTION', async () => {
    const server = await startServer(newDataDir(), { env: { KEYWARD_AUDIT_RETENTION: '1d' }, wrap: (command) => [...command, '--audit-retention', '30d'] })
    expect(server.stderr.text).toContain(`"audit_retention_seconds":${30 * 86400}`)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  })

  test('a bad --audit-retention: exit 2', async () => {
    const result = await keyward(['serve', '--data', newDataDir(), '--port', '0', '--audit-retention', 'forever'])
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('--audit-retention')
  })
})
