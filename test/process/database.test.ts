/**
 * Database mode with the real CLI (README "Database mode"): two `serve --database-url` instances on
 * one fresh database answer as one server would. A change on one is seen by the next request to
 * the other (a revocation too: 401 on the next request to either, also when the CLI revokes with
 * --database-url and no server is asked; a suspension on A while B answers a stream of requests
 * from credentials it remembers: every request sent after it was acknowledged is 401); uniqueness holds between them; a killed instance loses no
 * acknowledged write; a database restart is a run of 503s, then recovery without restarting
 * keyward. `verify --database-url` checks the schema version.
 * Skipped where no PostgreSQL answers (README, "Database mode").
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { existsSync, rmSync } from 'node:fs'
import { tempDir } from '../support/temp-dirs'
import { createTestDatabase, databaseTestsCanRun, pausableRelay, postgresPrograms, privatePostgres, TEST_DATABASE_URL, type PausableRelay, type PrivatePostgres, type TestDatabase } from '../support/database'
import { MIGRATION_LOCK_KEY, SCHEMA_VERSION } from '../../src/storage/postgres/schema'
import { api, initLine, keywardCommand, killServers, run, spawnServer, startServer, stopServer, waitFor, type ServerProcess } from '../support/server-process'

const canRun = await databaseTestsCanRun()

describe('--database-url', () => {
  test('anything but a postgres:// or postgresql:// URL the client accepts is bad usage (exit 2), from the flag or the environment; an empty flag too', async () => {
    const notPostgres = 'must be a postgres:// or postgresql:// URL'
    for (const [args, env, says] of [
      [['serve', '--port', '0', '--database-url', 'mysql://db/keyward'], {}, notPostgres],
      [['init', '--database-url', 'not a url'], {}, notPostgres],
      [['issue-token', '--org', crypto.randomUUID(), '--role', 'admin'], { KEYWARD_DATABASE_URL: 'http://db/keyward' }, notPostgres],
      // Neither an empty flag (`--database-url "$URL"`, URL unset) nor a URL the client refuses
      // starts anything: not a data dir of its own, not a failure a service manager restarts.
      [['serve', '--port', '0', '--database-url', ''], {}, 'is empty'],
      [['init', '--database-url', ''], {}, 'is empty'],
      [['serve', '--port', '0', '--database-url', 'postgres://keyward:p%ZZ@127.0.0.1:1/keyward'], {}, 'has a malformed %-escape'],
      [['init', '--database-url', 'postgres://keyward@/keyward?host=/var/run/postgresql'], {}, 'does not parse as a URL (a Unix socket is postgres:///'],
      [['verify'], { KEYWARD_DATABASE_URL: 'postgres://127.0.0.1:1/keyward?sslmode=bogus' }, "does not parse: The argument 'sslmode' must be one of"],
    ] as const) {
      const result = await run(keywardCommand([...args]), env)
      expect({ args, code: result.code }).toEqual({ args, code: 2 })
      // Named as the operator gave it: the flag, or the variable.
      expect(result.stderr).toContain(`keyward: ${'KEYWARD_DATABASE_URL' in env ? 'KEYWARD_DATABASE_URL' : '--database-url'} ${says}`)
      expect(result.stdout).toBe('')
    }
  })

  test('one store: --data named on the command line wins over KEYWARD_DATABASE_URL; --data with --database-url is bad usage (exit 2)', async () => {
    const parent = tempDir('keyward-one-store-')
    const nowhere = 'postgres://postgres@127.0.0.1:1/nowhere' // would fail at once if it were used
    const init = await run(keywardCommand(['init', '--data', `${parent}/data`]), { KEYWARD_DATABASE_URL: nowhere })
    expect(init.code).toBe(0)
    const verify = await run(keywardCommand(['verify', '--data', `${parent}/data`]), { KEYWARD_DATABASE_URL: nowhere })
    expect([verify.code, verify.stdout]).toEqual([0, expect.stringContaining(`data dir ${parent}/data is intact`)])
    for (const command of ['serve', 'init', 'verify', 'tokens', 'issue-token']) {
      const both = await run(keywardCommand([command, '--data', `${parent}/other`, '--database-url', nowhere]))
      expect({ command, code: both.code }).toEqual({ command, code: 2 })
      expect(both.stderr).toContain('give --data or --database-url, not both')
    }
    expect(existsSync(`${parent}/other`)).toBe(false)
    rmSync(parent, { recursive: true, force: true })
  })

  test('--database-timeout that is not a duration: bad usage (exit 2)', async () => {
    // 25d: more than a timer holds (it would fire at once); 24h is the longest.
    for (const value of ['10', '0s', 'soon', '1.5s', '25d', '25h']) {
      const result = await run(keywardCommand(['serve', '--port', '0', '--database-url', TEST_DATABASE_URL, '--database-timeout', value]))
      expect({ value, code: result.code }).toEqual({ value, code: 2 })
      expect(result.stderr).toContain(`invalid --database-timeout '${value}'`)
    }
  })

  test('a database that cannot be reached at start: exit 1 with a message, nothing printed on stdout', async () => {
    const url = new URL(TEST_DATABASE_URL)
    url.port = '1' // nothing listens there
    const result = await run(keywardCommand(['serve', '--port', '0', '--database-url', url.toString()]))
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(`database ${url.pathname.slice(1)} on ${url.hostname}:1: the database cannot be reached`)
    const listed = await run(keywardCommand(['tokens', 'list', '--database-url', url.toString()]))
    expect([listed.code, listed.stderr]).toEqual([1, expect.stringContaining(`on ${url.hostname}:1: the database cannot be reached`)])
    expect(result.stdout).toBe('')
    // A Unix socket (README "Configuration") is named as its socket's path, not as the host ":5432".
    const socket = await run(keywardCommand(['tokens', 'list', '--database-url', 'postgres:///keyward?host=/nonexistent-socket-dir&user=keyward']))
    expect([socket.code, socket.stderr]).toEqual([1, expect.stringContaining('database keyward on socket /nonexistent-socket-dir/.s.PGSQL.5432: the database cannot be reached')])
  })
})

describe.skipIf(!canRun)('a stop while the start waits', () => {
  test("for another instance's migration lock: the process ends at once, exit 0, nothing initialised", async () => {
    const db = await createTestDatabase()
    // Holds the lock as an instance migrating the schema does, for as long as the test needs.
    const holder = new SQL({ url: db.url, max: 1 })
    try {
      await holder.unsafe(`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`)
      const server = spawnServer({ databaseUrl: db.url })
      const waiting = async () => (await holder.unsafe(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`))[0].n > 0
      await waitFor('the server to wait for the lock', waiting, server.proc).catch((error) => {
        throw new Error(`${error.message}; stderr:\n${server.stderr.text}`)
      })
      expect(await stopServer(server, 'SIGTERM')).toBe(0)
      expect(server.stdout.text).toBe('') // no token: nothing was initialised
      expect(server.stderr.text).toContain('SIGTERM: stopping now, before the database is ready (nothing was served)')
      expect((await holder.unsafe(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'`))[0].n).toBe(0)
    } finally {
      await holder.close()
      await db.drop()
    }
  })
})

describe.skipIf(!canRun)('a database that holds only what its initialisation made', () => {
  test('init and every start say how to get a token (its line may never have been shown)', async () => {
    const db = await createTestDatabase()
    try {
      const first = await run(keywardCommand(['init', '--database-url', db.url]))
      const vendorId = JSON.parse(first.stdout).organization_id
      const hint = `nothing has been done here since the first start: if its vendor admin token was never shown (that start was stopped before printing it), issue one with keyward issue-token --database-url URL --org ${vendorId} --role admin`
      const again = await run(keywardCommand(['init', '--database-url', db.url]))
      expect([again.code, again.stderr]).toEqual([1, expect.stringContaining(`is already initialised; ${hint}\n`)])
      const server = await startServer({ databaseUrl: db.url })
      expect(await stopServer(server, 'SIGTERM')).toBe(0)
      const warning = server.stderr.text.split('\n').filter((line) => line.includes('nothing has been done')).map((line) => JSON.parse(line))
      expect(warning.map(({ level, msg }) => ({ level, msg }))).toEqual([{ level: 'warn', msg: hint }])
    } finally {
      await db.drop()
    }
  })
})

describe.skipIf(!canRun)('two instances on one database', () => {
  let db: TestDatabase
  let A: ServerProcess
  let B: ServerProcess
  let vendor: string
  let vendorId: string
  const customers: { id: string; token: string }[] = []

  beforeAll(async () => {
    db = await createTestDatabase()
    // Started together on an empty database: exactly one initialises it and prints the token.
    ;[A, B] = await Promise.all([startServer({ databaseUrl: db.url }), startServer({ databaseUrl: db.url })])
    const printed = [A, B].filter((server) => server.stdout.text.trim() !== '')
    expect(printed).toHaveLength(1)
    ;({ token: vendor, organization_id: vendorId } = initLine(printed[0]!))
    for (const name of ['C1', 'C2']) {
      const created = await api(A.url, vendor, 'POST', '/api/organizations', { description: name, parent_id: vendorId })
      expect(created.status).toBe(201)
      const id = created.body.organization.organization_id as string
      const issued = await run(keywardCommand(['issue-token', '--database-url', db.url, '--org', id, '--role', 'admin']))
      expect(issued.code).toBe(0)
      customers.push({ id, token: issued.stdout.trim() })
    }
  }, 60000)

  afterAll(async () => {
    await killServers()
    await db?.drop()
  })

  /** A server on the database through a relay of its own (`pausableRelay`) for `body`, then stopped, and the relay closed. */
  async function throughRelay(env: Record<string, string>, body: (server: ServerProcess, relay: PausableRelay) => Promise<void>): Promise<void> {
    const relay = pausableRelay(db.url)
    const server = await startServer({ databaseUrl: relay.url }, { env })
    try {
      await body(server, relay)
    } finally {
      await stopServer(server, 'SIGTERM')
      relay.close()
    }
  }

  test('issue-token for an unknown organization: exit 2', async () => {
    const result = await run(keywardCommand(['issue-token', '--database-url', db.url, '--org', crypto.randomUUID(), '--role', 'viewer']))
    expect(result.code).toBe(2)
    expect(result.stderr).toContain('unknown organization')
    expect(result.stdout).toBe('')
  })

  test('init on an initialised database exits 1 and prints nothing', async () => {
    const init = await run(keywardCommand(['init', '--database-url', db.url]))
    expect(init.code).toBe(1)
    expect(init.stderr).toContain('already initialised')
    expect(init.stdout).toBe('')
  })

  test('a token revoked on A is 401 on B at once; revoked by the CLI, on both before the command exits', async () => {
    const c1 = customers[0]!
    const issued = await api(A.url, c1.token, 'POST', '/api/tokens', { organization_id: c1.id, role: 'viewer' })
    expect(issued.status).toBe(201)
    const { secret, token } = issued.body
    expect((await api(B.url, secret, 'GET', '/api/consumers')).status).toBe(200)
    expect((await api(A.url, c1.token, 'PATCH', `/api/tokens/${token.token_id}/revoke`)).status).toBe(200)
    expect((await api(B.url, secret, 'GET', '/api/consumers')).status).toBe(401)
    expect((await api(A.url, secret, 'GET', '/api/consumers')).status).toBe(401)

    // The CLI writes to the database itself: a token it issues works on both at once, and one it
    // revokes is 401 on both as soon as it exits.
    const cli = await run(keywardCommand(['issue-token', '--database-url', db.url, '--org', c1.id, '--role', 'viewer', '--description', 'cli']))
    expect(cli).toMatchObject({ code: 0, stderr: '' })
    const cliToken = cli.stdout.trim()
    for (const server of [A, B]) expect((await api(server.url, cliToken, 'GET', '/api/consumers')).status).toBe(200)
    const listed = await run(keywardCommand(['tokens', 'list', '--database-url', db.url, '--org', c1.id]))
    expect(listed.code).toBe(0)
    const records = listed.stdout.trim().split('\n').map((line) => JSON.parse(line))
    expect(records.map((r) => [r.description, r.state])).toEqual([[null, 'active'], [null, 'revoked'], ['cli', 'active']])
    expect(listed.stdout).not.toContain(cliToken.slice(37)) // no secret in a record
    const revoked = await run(keywardCommand(['tokens', 'revoke', records[2].token_id, '--database-url', db.url]))
    expect(revoked).toEqual({ code: 0, stdout: '', stderr: '' })
    for (const server of [A, B]) expect((await api(server.url, cliToken, 'GET', '/api/consumers')).status).toBe(401)
    const unknown = await run(keywardCommand(['tokens', 'revoke', crypto.randomUUID(), '--database-url', db.url]))
    expect(unknown.code).toBe(2)

    // Each change has its event, the CLI's with the command as the actor, readable on either instance.
    const events = await api(B.url, vendor, 'GET', `/api/audit-events?target_ids=${token.token_id},${records[2].token_id}`)
    expect(events.body.audit_events.map((e: { action: string; actor: unknown }) => [e.action, e.actor])).toEqual([
      ['token.create', { organization_id: c1.id, token_id: expect.any(String), role: 'admin' }],
      ['token.revoke', { organization_id: c1.id, token_id: expect.any(String), role: 'admin' }],
      ['token.create', { cli: 'issue-token' }],
      ['token.revoke', { cli: 'tokens revoke' }],
    ])
  })

  test('created on A, read on B', async () => {
    const [c1] = customers
    const consumerId = crypto.randomUUID()
    const created = await api(A.url, c1!.token, 'POST', '/api/consumers', { consumer_id: consumerId })
    expect(created.status).toBe(201)
    const read = await api(B.url, c1!.token, 'GET', `/api/consumers/${consumerId}`)
    expect(read.status).toBe(200)
    expect(read.body.consumer).toEqual(created.body.consumer)
  })

  test('--database-connections (KEYWARD_DATABASE_CONNECTIONS) bounds what an instance holds: N + 2 connections under any load', async () => {
    const c1 = customers[0]!
    // 6 for reads and changes, 2 for lists (docs/storage.md, "Plans").
    await throughRelay({ KEYWARD_DATABASE_CONNECTIONS: '8' }, async (server, relay) => {
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          i % 2 === 0 ? api(server.url, c1.token, 'POST', '/api/consumers', { consumer_id: crypto.randomUUID() }) : api(server.url, c1.token, 'GET', '/api/consumers'),
        ),
      )
      expect(answers.map((answer) => answer.status).sort()).toEqual([...Array(20).fill(200), ...Array(20).fill(201)])
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200)
      expect(relay.peakConnections).toBeGreaterThanOrEqual(3)
      expect(relay.peakConnections).toBeLessThanOrEqual(10)
    })
  })

  test("SIGUSR1 (the embedded store's snapshot) is logged and changes nothing: the instance serves on", async () => {
    A.proc.kill('SIGUSR1')
    await waitFor('the SIGUSR1 line', () => A.stderr.text.includes('SIGUSR1: no snapshot in database mode'), A.proc)
    expect((await api(A.url, customers[0]!.token, 'GET', '/api/consumers')).status).toBe(200)
  })

  test('a customer suspended on A: its tokens are 401 on B at once, and work again once activated on B', async () => {
    const c2 = customers[1]!
    expect((await api(B.url, c2.token, 'GET', '/api/consumers')).status).toBe(200)
    expect((await api(A.url, vendor, 'PATCH', `/api/organizations/${c2.id}/suspend`)).status).toBe(200)
    expect((await api(B.url, c2.token, 'GET', '/api/consumers')).status).toBe(401)
    expect((await api(B.url, vendor, 'PATCH', `/api/organizations/${c2.id}/activate`)).status).toBe(200)
    expect((await api(A.url, c2.token, 'GET', '/api/consumers')).status).toBe(200)
  })

  test('under a stream of requests to B, every request sent after a suspension on A was acknowledged is 401 (remembered credentials)', async () => {
    const c2 = customers[1]!
    const sent: { at: number; status: number }[] = []
    let suspendedAt = Infinity
    // Eight clients keep B busy with the customer's token, so that B answers from the credential it
    // remembers; each stops once it has itself sent one request after the suspension.
    const client = async () => {
      for (;;) {
        const at = performance.now()
        const { status } = await api(B.url, c2.token, 'GET', '/api/consumers')
        sent.push({ at, status })
        if (at > suspendedAt) return
      }
    }
    const clients = Array.from({ length: 8 }, client)
    await waitFor('answers from B', () => sent.filter((r) => r.status === 200).length >= 50)
    expect((await api(A.url, vendor, 'PATCH', `/api/organizations/${c2.id}/suspend`)).status).toBe(200)
    suspendedAt = performance.now()
    try {
      await Promise.all(clients)
      const after = sent.filter((r) => r.at > suspendedAt)
      expect(after.length).toBeGreaterThanOrEqual(8)
      expect(after.map((r) => r.status)).toEqual(after.map(() => 401))
    } finally {
      // Active again whatever happened: the tests after this one use the customer.
      expect((await api(A.url, vendor, 'PATCH', `/api/organizations/${c2.id}/activate`)).status).toBe(200)
    }
    expect((await api(B.url, c2.token, 'GET', '/api/consumers')).status).toBe(200)
  })

  test('one consumer id created at once on A and B: one customer gets 201 and 200, two customers 201 and 409', async () => {
    const [c1, c2] = customers
    for (let round = 0; round < 10; round++) {
      const id = crypto.randomUUID()
      const same = await Promise.all([A, B].map((server) => api(server.url, c1!.token, 'POST', '/api/consumers', { consumer_id: id })))
      expect(same.map((r) => r.status).sort()).toEqual([200, 201])
      expect(same[0]!.body.consumer).toEqual(same[1]!.body.consumer)

      const contested = crypto.randomUUID()
      const two = await Promise.all([
        api(A.url, c1!.token, 'POST', '/api/consumers', { consumer_id: contested }),
        api(B.url, c2!.token, 'POST', '/api/consumers', { consumer_id: contested }),
      ])
      expect(two.map((r) => r.status).sort()).toEqual([201, 409])
    }
  })

  test('concurrent enrollments of one tuple: the same enrollment id is 201 and 200, another id 201 and 409', async () => {
    const c1 = customers[0]!
    const app = await api(A.url, c1.token, 'POST', '/api/applications', { organization_id: c1.id, description: 'App' })
    expect(app.status).toBe(201)
    const enroll = (server: ServerProcess, tuple: Record<string, string>, enrollmentId: string) =>
      api(server.url, c1.token, 'POST', '/api/enrollments', { ...tuple, enrollment_id: enrollmentId, installation_description: 'Pixel 8' })
    for (let round = 0; round < 10; round++) {
      const tuple = { consumer_id: crypto.randomUUID(), installation_id: crypto.randomUUID(), application_id: app.body.application.application_id, environment: 'PRODUCTION' }
      const enrollmentId = crypto.randomUUID()
      const same = await Promise.all([enroll(A, tuple, enrollmentId), enroll(B, tuple, enrollmentId)])
      expect(same.map((r) => r.status).sort()).toEqual([200, 201])

      const fresh = { ...tuple, consumer_id: crypto.randomUUID() }
      const other = await Promise.all([enroll(A, fresh, crypto.randomUUID()), enroll(B, fresh, crypto.randomUUID())])
      expect(other.map((r) => r.status).sort()).toEqual([201, 409])
      expect(other.find((r) => r.status === 409)!.body.code).toBe('already_enrolled')
    }
  })

  test('kill -9 of an instance under write load loses no acknowledged write', async () => {
    const c1 = customers[0]!
    const victim = await startServer({ databaseUrl: db.url })
    const acknowledged: string[] = []
    let killed = false
    // Four writers on the victim until it dies; it is killed once 100 writes are acknowledged.
    const writer = async () => {
      while (!killed || acknowledged.length < 100) {
        const id = crypto.randomUUID()
        try {
          const res = await api(victim.url, c1.token, 'POST', '/api/consumers', { consumer_id: id })
          if (res.status === 201) acknowledged.push(id)
          else throw new Error(`unexpected ${res.status}`)
        } catch (error) {
          if (killed) return // the connection died with the server: not acknowledged
          throw error
        }
      }
    }
    const writers = [writer(), writer(), writer(), writer()]
    await waitFor('100 acknowledged writes', () => acknowledged.length >= 100, victim.proc)
    killed = true
    expect(await stopServer(victim, 'SIGKILL')).toBe(-9)
    await Promise.all(writers)
    const checks = await Promise.all(acknowledged.map((id) => api(B.url, c1.token, 'GET', `/api/consumers/${id}`)))
    expect(checks.filter((r) => r.status !== 200).map((r) => r.status)).toEqual([])
  }, 60000)

  test('a database that stops answering: requests are 503 database_unavailable after --database-timeout (KEYWARD_DATABASE_TIMEOUT), then served again without a restart', async () => {
    const c1 = customers[0]!
    await throughRelay({ KEYWARD_DATABASE_TIMEOUT: '1s' }, async (server, relay) => {
      const before = await api(server.url, c1.token, 'POST', '/api/consumers', { consumer_id: crypto.randomUUID() })
      expect(before.status).toBe(201)
      relay.pause()
      const read = await api(server.url, c1.token, 'GET', `/api/consumers/${before.body.consumer.consumer_id}`)
      const write = await api(server.url, c1.token, 'POST', '/api/consumers', { consumer_id: crypto.randomUUID() })
      expect([read.status, read.body.code, write.status, write.body.code]).toEqual([503, 'database_unavailable', 503, 'database_unavailable'])
      expect((await fetch(`${server.url}/readyz`)).status).toBe(503)
      relay.resume()
      const after = await api(server.url, c1.token, 'POST', '/api/consumers', { consumer_id: crypto.randomUUID() })
      expect(after.status).toBe(201)
      // And /readyz says so again, once the probe it keeps for a moment is asked again.
      await waitFor('/readyz to answer 200', async () => (await fetch(`${server.url}/readyz`)).status === 200, server.proc)
      expect(server.proc.exitCode).toBeNull()
    })
  }, 30000)

  test('a database that answers each step just within --database-timeout: a request is 503 once its steps together have waited it, not after each step had a timeout of its own', async () => {
    const c1 = customers[0]!
    await throughRelay({ KEYWARD_DATABASE_TIMEOUT: '1s' }, async (server, relay) => {
      const created = await api(server.url, c1.token, 'POST', '/api/consumers', { consumer_id: crypto.randomUUID() })
      expect(created.status).toBe(201)
      const path = `/api/consumers/${created.body.consumer.consumer_id}`
      // Warm: the token is remembered, and the connections of the reads (and of the generation reads) are open.
      for (let i = 0; i < 3; i++) expect((await api(server.url, c1.token, 'GET', path)).status).toBe(200)
      // Each answer 0.7 s late: the token's check (a read of the credential generation) and the read
      // itself take 1.4 s together, each within the timeout. Each step had a timeout of its own: a 200.
      relay.delayAnswers(700)
      const slow = await api(server.url, c1.token, 'GET', path)
      expect([slow.status, slow.body.code]).toEqual([503, 'database_unavailable'])
      relay.delayAnswers(0)
      expect((await api(server.url, c1.token, 'GET', path)).status).toBe(200)
    })
  }, 30000)
})

/** A server of its own (test/support/database.ts), where PostgreSQL's server programs are installed. */
const programs = canRun ? postgresPrograms() : null

describe.skipIf(programs === null)('the database restarted', () => {
  let database: PrivatePostgres
  beforeAll(async () => {
    database = await privatePostgres(programs!)
  }, 60000)
  afterAll(async () => {
    await killServers()
    await database?.close()
  })

  test('under load: 503 database_unavailable, then recovery without restarting keyward; nothing acknowledged is lost', async () => {
    const [A, B] = [await startServer({ databaseUrl: database.url }), await startServer({ databaseUrl: database.url })]
    const { token: vendor, organization_id: vendorId } = initLine(A)
    const customer = await api(A.url, vendor, 'POST', '/api/organizations', { description: 'C1', parent_id: vendorId })
    expect(customer.status).toBe(201)
    const statuses = new Map<string, number>()
    const acknowledged: string[] = []
    let phase: 'before' | 'down' | 'after' = 'before'
    const seenDown: number[] = []
    const client = async () => {
      for (let i = 0; phase !== 'after' || i < 20; i++) {
        const id = crypto.randomUUID()
        const res = i % 2 === 0 ? await api(A.url, vendor, 'POST', '/api/consumers', { consumer_id: id, organization_id: customer.body.organization.organization_id }) : await api(A.url, vendor, 'GET', '/api/consumers?page_size=5')
        const key = res.status === 503 ? `503 ${res.body.code}` : String(res.status)
        statuses.set(key, (statuses.get(key) ?? 0) + 1)
        if (res.status === 201) acknowledged.push(id)
        if (phase === 'down') seenDown.push(res.status)
        if (phase === 'after' && res.status === 503) i = 0 // count 20 in a row after recovery
      }
    }
    const clients = [client(), client()]
    await waitFor('some traffic', () => acknowledged.length >= 20)
    await database.stop()
    phase = 'down'
    try {
      await waitFor('requests answered 503 while the database is down', () => seenDown.filter((s) => s === 503).length >= 10)
    } finally {
      await database.start()
    }
    phase = 'after'
    await Promise.all(clients)
    // Only these answers, ever: no 500, no hang; and the instance serves again by itself.
    expect([...statuses.keys()].sort()).toEqual(['200', '201', '503 database_unavailable'])
    expect(A.proc.exitCode).toBeNull()
    const after = await api(A.url, vendor, 'POST', '/api/consumers', { consumer_id: crypto.randomUUID(), organization_id: customer.body.organization.organization_id })
    expect(after.status).toBe(201)
    const checks = await Promise.all(acknowledged.map((id) => api(B.url, vendor, 'GET', `/api/consumers/${id}`)))
    expect(checks.filter((r) => r.status !== 200)).toEqual([])
  }, 90000)
})

describe.skipIf(!canRun)('verify --database-url', () => {
  test("a database of this keyward's schema: exit 0; none, or a newer one: exit 1 naming both versions (serve and issue-token refuse it too)", async () => {
    const db = await createTestDatabase()
    try {
      const verify = () => run(keywardCommand(['verify', '--database-url', db.url]))
      const empty = await verify()
      expect(empty.code).toBe(1)
      expect(empty.stderr).toContain('not initialised')
      expect((await run(keywardCommand(['init', '--database-url', db.url]))).code).toBe(0)
      const current = await verify()
      expect(current).toMatchObject({ code: 0, stderr: '' })
      expect(current.stdout).toContain(`schema version ${SCHEMA_VERSION}`)
      const sql = new SQL({ url: db.url, max: 1 })
      await sql`INSERT INTO schema_migrations (version, name) VALUES (${SCHEMA_VERSION + 1}, 'from the future')`
      await sql.close()
      const [newer, served, issued] = await Promise.all([
        verify(),
        run(keywardCommand(['serve', '--database-url', db.url, '--port', '0', '--rate-limit', '0'])),
        run(keywardCommand(['issue-token', '--database-url', db.url, '--org', crypto.randomUUID(), '--role', 'admin'])),
      ])
      for (const refused of [newer, served, issued]) {
        expect([refused.code, refused.stdout]).toEqual([1, ''])
        expect(refused.stderr).toContain(`version ${SCHEMA_VERSION + 1}`)
        expect(refused.stderr).toContain(`(version ${SCHEMA_VERSION})`)
      }
    } finally {
      await db.drop()
    }
  })
})
