/**
 * The PostgreSQL storage against a lost database (docs/storage.md, "PostgreSQL"): closed connections,
 * a database that stops answering (held in a relay, `pausableRelay`), answer deadlines.
 * Skipped where no database server answers (README, "Database mode"); the set-up is test/support/postgres-storage.ts `createTestStorage`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { PostgresStorage, type PostgresOptions } from '../../src/storage/postgres'
import { DatabaseUnavailableError, isConnectionLost } from '../../src/storage/postgres/errors'
import { databaseTestsCanRun, createTestDatabase, pausableRelay, type PausableRelay, type TestDatabase } from '../support/database'
import { asTenant, createTestStorage, freshConsumer, TEST_CUSTOMER as customer } from '../support/postgres-storage'
import { waitFor } from '../support/server-process'

const reachable = await databaseTestsCanRun()

describe.skipIf(!reachable)('PostgreSQL storage', () => {
  let db: TestDatabase
  let storage: PostgresStorage
  let admin: SQL
  let close = async () => {}
  beforeAll(async () => ({ db, storage, admin, close } = await createTestStorage()))
  afterAll(() => close())

  /** A storage on the test's database through a relay of its own (`pausableRelay`), for `work`; both closed after. */
  async function throughRelay<T>(options: PostgresOptions, work: (relay: PausableRelay, relayed: PostgresStorage) => Promise<T>): Promise<T> {
    const relay = pausableRelay(db.url)
    const relayed = PostgresStorage.connect(relay.url, options)
    try {
      return await work(relay, relayed)
    } finally {
      await relayed.close()
      relay.close()
    }
  }

  describe('a lost database', () => {
    test('connections closed by the server: the next read and transaction still succeed', async () => {
      const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
      expect(await storage.find('consumers', record.consumer_id)).toEqual(record)
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
      expect((await storage.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' }))).state).toBe('suspended')
    })

    test('a connection lost during its COMMIT: DatabaseUnavailableError (the outcome is unknown to keyward), and the change is not made again', async () => {
      // A COMMIT that takes a moment, to be cut in the middle: a deferred trigger sleeps at commit.
      await admin.unsafe('CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.5); RETURN NULL; END $$')
      await admin.unsafe('CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON consumers DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()')
      try {
        let runs = 0
        // Its outcome taken at once: the change may fail before the statement that cuts it returns.
        const outcome = storage
          .transaction(async (tx) => {
            runs++
            return tx.insert('consumers', freshConsumer())
          })
          .then(
            () => 'committed',
            (error: unknown) => error,
          )
        const committing = async () => (await admin`SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'`).map((row: { pid: number }) => row.pid)
        await waitFor('the COMMIT under way', async () => (await committing()).length > 0)
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event = 'PgSleep'`
        expect(await outcome).toBeInstanceOf(DatabaseUnavailableError)
        expect(runs).toBe(1)
      } finally {
        await admin.unsafe('DROP TRIGGER slow_commit ON consumers')
        await admin.unsafe('DROP FUNCTION slow_commit()')
      }
    })

    test('connections closed by the server: a remembered credential is still confirmed (the generation read reconnects)', async () => {
      const issued = await storage.transaction((tx) =>
        tx.insert('tokens', { token_id: crypto.randomUUID(), organization_id: customer, role: 'viewer', description: null, state: 'active', expires: Date.now() * 1000 + 3_600_000_000, token_hash: 'ef'.repeat(32) }),
      )
      const remembered = await storage.findCredential(issued.token_id)
      expect(await storage.findCredential(issued.token_id)).toBe(remembered!) // answered from memory
      await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
      expect(await storage.findCredential(issued.token_id)).toBe(remembered!)
    })

    test('a database that refuses connections, or was dropped: reads and transactions are DatabaseUnavailableError', async () => {
      const other = await createTestDatabase()
      const name = new URL(other.url).pathname.slice(1)
      const instance = PostgresStorage.connect(other.url)
      const unavailable = async () => {
        expect(await Promise.resolve(instance.find('consumers', crypto.randomUUID())).catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError)
        expect(await instance.transaction((tx) => tx.insert('consumers', freshConsumer())).catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError)
      }
      try {
        await instance.underMigrationLock(async () => {})
        await admin.unsafe(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`)
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${name}`
        await unavailable() // 55000: not accepting connections
        await admin.unsafe(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`)
        expect(await instance.find('consumers', crypto.randomUUID())).toBeUndefined() // back by itself
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${name}`
        await admin.unsafe(`DROP DATABASE ${name} WITH (FORCE)`)
        await unavailable() // 3D000: no such database
      } finally {
        await instance.close()
        await other.drop()
      }
    })

    test('a database that stops answering: reads and transactions are DatabaseUnavailableError after the answer timeout; the abandoned change is rolled back; it works again once answers come', () =>
      throughRelay({ answerTimeoutMs: 1000 }, async (relay, hanging) => {
        const record = await hanging.transaction((tx) => tx.insert('consumers', freshConsumer()))
        const issued = await hanging.transaction((tx) =>
          tx.insert('tokens', { token_id: crypto.randomUUID(), organization_id: customer, role: 'viewer', description: null, state: 'active', expires: Date.now() * 1000 + 3_600_000_000, token_hash: 'ab'.repeat(32) }),
        )
        expect(await hanging.findCredential(issued.token_id)).toBeDefined()
        relay.pause()
        const unanswered = (work: () => unknown) => Promise.resolve().then(work).catch((error) => error)
        const read = await unanswered(() => hanging.find('consumers', record.consumer_id))
        expect(read).toBeInstanceOf(DatabaseUnavailableError)
        // Said as what it is, for the log line an operator reads (docs/operations.md): slow, not unreachable.
        expect((read as Error).message).toStartWith('the database did not answer in time: no answer within 1000 ms (--database-timeout)')
        // A remembered credential waits for a read of the generation: that one is bounded too.
        expect(await unanswered(() => hanging.findCredential(issued.token_id))).toBeInstanceOf(DatabaseUnavailableError)
        expect(await unanswered(() => hanging.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' })))).toBeInstanceOf(DatabaseUnavailableError)
        relay.resume()
        // The change's connection was closed at the deadline, before its COMMIT: nothing of it holds.
        expect((await hanging.find('consumers', record.consumer_id))?.state).toBe('active')
        expect((await hanging.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' }))).state).toBe('suspended')
        expect(await hanging.findCredential(issued.token_id)).toBeDefined()
      }))

    test("one request's steps share one answer timeout: once they have waited it, the next step is DatabaseUnavailableError at once and never starts; outside a request (the CLI) each step has the whole timeout", () =>
      throughRelay({ answerTimeoutMs: 1000 }, async (relay, hanging) => {
        const record = await hanging.transaction((tx) => tx.insert('consumers', freshConsumer()))
        const fresh = freshConsumer()
        const [read, change] = await hanging.requestScope(async () => {
          relay.pause()
          const read = await hanging.find('consumers', record.consumer_id).catch((error) => error)
          relay.resume()
          return [read, await hanging.transaction((tx) => tx.insert('consumers', fresh)).catch((error) => error)]
        })
        expect(read).toBeInstanceOf(DatabaseUnavailableError)
        expect(change).toBeInstanceOf(DatabaseUnavailableError)
        expect(await hanging.find('consumers', fresh.consumer_id)).toBeUndefined()
        expect((await hanging.transaction((tx) => tx.insert('consumers', fresh))).consumer_id).toBe(fresh.consumer_id)
      }))

    test('a read past its deadline is cancelled by the database too (statement_timeout): no work goes on that nobody will read', async () => {
      const late = PostgresStorage.connect(db.url, { answerTimeoutMs: 1000 })
      const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
      expect(await late.find('consumers', record.consumer_id)).toEqual(record) // its connection made first
      const waitingReads = async () =>
        Number((await admin`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SELECT%consumers%'`)[0].n)
      try {
        await admin.begin(async (locked) => {
          // Reads wait for an ACCESS EXCLUSIVE lock: keyward's read waits, then its answer timeout passes.
          await locked`LOCK TABLE consumers IN ACCESS EXCLUSIVE MODE`
          expect(await late.find('consumers', record.consumer_id).catch((error) => error)).toBeInstanceOf(DatabaseUnavailableError)
          // Still holding the lock: the database stops the read by itself, within moments.
          await waitFor('the database to cancel the read', async () => (await waitingReads()) === 0)
        })
      } finally {
        await late.close()
      }
    })

    test('lists are planned for their own values, on connections of their own; the others keep cached plans (docs/storage.md, "Plans")', async () => {
      const pools = storage as unknown as { sql: SQL; listSql: SQL }
      expect((await pools.listSql`SHOW plan_cache_mode`)[0].plan_cache_mode).toBe('force_custom_plan')
      expect((await pools.sql`SHOW plan_cache_mode`)[0].plan_cache_mode).toBe('auto')
      for (const pool of [pools.sql, pools.listSql]) expect((await pool`SHOW statement_timeout`)[0].statement_timeout).toBe('10s')
    })

    test('a transaction past its deadline is rolled back, its row locks freed: what its body does after that is never committed', async () => {
      const late = PostgresStorage.connect(db.url, { answerTimeoutMs: 1000 })
      try {
        // Its connection made first, within its own deadline (a loaded machine may take a while).
        const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
        expect(await late.find('consumers', record.consumer_id)).toEqual(record)
        let deadlinePassed!: () => void
        const afterDeadline = new Promise<void>((resolve) => (deadlinePassed = resolve))
        let bodyEnded!: () => void
        const ended = new Promise<void>((resolve) => (bodyEnded = resolve))
        const abandoned = late.transaction(async (tx) => {
          try {
            await tx.find('consumers', record.consumer_id, 'update') // holds the row's lock
            await afterDeadline // the body goes on only once the caller was answered 503
            return await tx.update('consumers', record.consumer_id, { state: 'suspended' })
          } finally {
            bodyEnded()
          }
        })
        expect(await abandoned.catch((error) => error)).toBeInstanceOf(DatabaseUnavailableError)
        deadlinePassed()
        await ended
        // Had its connection stayed open, this lock would wait for its COMMIT and read `suspended`.
        const seen = await storage.transaction(async (tx) => (await tx.find('consumers', record.consumer_id, 'update'))!.state)
        expect(seen).toBe('active')
      } finally {
        await late.close()
      }
    })

    test('a change that waited past the answer timeout for a connection of the pool never runs, and gives the connection back', () =>
      throughRelay({ answerTimeoutMs: 3000, maxConnections: 1 }, async (relay, hanging) => {
        // The smallest pool: two connections for changes and reads (and one for lists). A deadline
        // that a loaded machine still meets when it opens the pool's connections again at the end.
        /**
         * Two transactions that each hold a connection at once (so the pool has opened both): two
         * tenants', as one tenant holds all connections but one at most.
         */
        const bothHolding = (record: { consumer_id: string }) => {
          let arrived = 0
          let bothIn!: () => void
          const both = new Promise<void>((resolve) => (bothIn = resolve))
          return Promise.allSettled(
            [0, 1].map((i) =>
              asTenant(hanging, `tenant ${i}`, () =>
                hanging.transaction(async (tx) => {
                  if (++arrived === 2) bothIn()
                  await both
                  return tx.find('consumers', record.consumer_id)
                }),
              ),
            ),
          )
        }
        const record = await hanging.transaction((tx) => tx.insert('consumers', freshConsumer()))
        // Both connections open before the relay stops: a connection still to be made through it
        // would never start its holder's body (the test then waited for it past its deadline).
        await bothHolding(record)
        relay.pause()
        // The pool's two connections are these transactions', which wait for an answer...
        const holders = [0, 1].map((i) => {
          let reserved!: () => void
          const holding = new Promise<void>((resolve) => (reserved = resolve))
          const done = asTenant(hanging, `tenant ${i}`, () =>
            hanging.transaction(async (tx) => {
              reserved()
              return await tx.find('consumers', record.consumer_id)
            }),
          )
          return { holding, done }
        })
        await Promise.all(holders.map((holder) => holder.holding))
        // ...so this change waits for a connection, past its deadline: answered 503, it must never run.
        let ran = false
        const late = hanging.transaction((tx) => {
          ran = true
          return tx.update('consumers', record.consumer_id, { state: 'suspended' })
        })
        // All three fail at about the same moment: each is caught at once.
        const outcomes = await Promise.all([...holders.map((holder) => holder.done), late].map((change) => change.catch((error: unknown) => error)))
        for (const outcome of outcomes) expect(outcome).toBeInstanceOf(DatabaseUnavailableError)
        // The late change waited for a connection, not for an answer: said so (docs/operations.md).
        expect((outcomes[2] as Error).message).toStartWith('no database connection was free in time')
        relay.resume()
        // The pool's connections serve their waiters in turn: by this read, the late reservation had one.
        expect((await hanging.find('consumers', record.consumer_id))?.state).toBe('active')
        expect(ran).toBe(false)
        // Had the late reservation kept its connection, these two could not each hold one at once.
        const held = await bothHolding(record)
        expect(held.map((outcome) => (outcome.status === 'fulfilled' ? outcome.value?.state : String(outcome.reason)))).toEqual(['active', 'active'])
      }))

    test('a server that will not speak TLS where the URL asks for it (sslmode=require): reads and transactions are DatabaseUnavailableError, not an unexpected error', async () => {
      // Answers a client's SSLRequest with N (no TLS), as a server whose TLS was switched off does.
      const refusing = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data: (socket) => void socket.write('N') } })
      const url = new URL(db.url)
      url.port = String(refusing.port)
      url.searchParams.set('sslmode', 'require')
      const plain = PostgresStorage.connect(url.toString())
      try {
        const outcomes = [await Promise.resolve(plain.find('consumers', crypto.randomUUID())).catch((e) => e), await plain.transaction((tx) => tx.insert('consumers', freshConsumer())).catch((e) => e)]
        for (const outcome of outcomes) expect(outcome).toBeInstanceOf(DatabaseUnavailableError)
      } finally {
        await plain.close()
        refusing.stop(true)
      }
    })

    test('certificate and name-resolution failures are a database that cannot be reached (503), by their codes', () => {
      for (const code of ['DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_HAS_EXPIRED', 'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_POSTGRES_TLS_UPGRADE_FAILED', 'ENOTFOUND', 'EAI_AGAIN']) {
        expect({ code, lost: isConnectionLost(Object.assign(new Error(code), { code })) }).toEqual({ code, lost: true })
      }
      // A mistake of keyward's own is not the database's.
      expect(isConnectionLost(Object.assign(new Error('x'), { code: 'ERR_POSTGRES_INVALID_QUERY_BINDING' }))).toBe(false)
    })

    test("a 503's message says why, by the database's own verdict: a statement it gave up on did not answer in time; retries still failing were too busy (docs/operations.md, \"Logs\")", () => {
      const answered = (errno: string) => new DatabaseUnavailableError(Object.assign(new Error('from the database'), { errno })).message
      expect(['55P03', '57014', '25P03', '40001', '40P01', '57P01', '08006'].map(answered)).toEqual([
        'the database did not answer in time: from the database',
        'the database did not answer in time: from the database',
        'the database did not answer in time: from the database',
        'the database was too busy for this change: from the database',
        'the database was too busy for this change: from the database',
        'the database cannot be reached: from the database',
        'the database cannot be reached: from the database',
      ])
    })

    test("readiness turning unready is told with the probe's error, and ready again (the log says why /readyz is 503: docs/operations.md)", async () => {
      const url = new URL(db.url)
      url.port = '1' // nothing listens there
      const nowhere = PostgresStorage.connect(url.toString())
      const told: [boolean, string | undefined][] = []
      nowhere.observeReadiness((reachable, reason) => told.push([reachable, reason]))
      try {
        expect(await nowhere.readiness()).toBe('database_unavailable')
        expect(told).toEqual([[false, expect.any(String)]])
      } finally {
        await nowhere.close()
      }
    })

    test("a database that answers without keyward's tables, or some of them (created again empty, a restore under way): not ready, and requests are DatabaseUnavailableError (503), not 500", async () => {
      const emptied = await createTestStorage()
      const told: [boolean, string | undefined][] = []
      emptied.storage.observeReadiness((reachable, reason) => told.push([reachable, reason]))
      try {
        const record = await emptied.storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
        expect(await emptied.storage.readiness()).toBe('ready')
        // One table missing (a restore part way), not the one the credential reads come from.
        await emptied.admin.unsafe('ALTER TABLE audit_events RENAME TO audit_events_aside')
        await waitFor('not ready', async () => (await emptied.storage.readiness()) === 'database_unavailable')
        expect(told).toEqual([[false, "the database lacks keyward's tables audit_events (dropped, or a restore under way)"]])
        await emptied.admin.unsafe('ALTER TABLE audit_events_aside RENAME TO audit_events')
        await waitFor('ready again', async () => (await emptied.storage.readiness()) === 'ready')
        // Every table gone.
        await emptied.admin.unsafe('DROP SCHEMA public CASCADE; CREATE SCHEMA public')
        // Once the kept answer expires (a second), the probe asks for a row every request needs.
        await waitFor('not ready', async () => (await emptied.storage.readiness()) === 'database_unavailable')
        const read = await emptied.storage.find('consumers', record.consumer_id).catch((error: unknown) => error)
        expect(read).toBeInstanceOf(DatabaseUnavailableError)
        // Said as what it is (log line, metrics reason), not as a network that cannot be reached.
        expect((read as Error).message).toStartWith("the database lacks keyward's tables: ")
        expect((read as Error).message).toContain('does not exist')
        expect((read as DatabaseUnavailableError).reason).toBe('database_tables_missing')
      } finally {
        await emptied.close()
      }
    })

    test('readiness unready because its probe got no answer in time is told too, and ready again once a new probe is answered', () =>
      throughRelay({}, async (relay, silent) => {
        const told: [boolean, string | undefined][] = []
        silent.observeReadiness((reachable, reason) => told.push([reachable, reason]))
        expect(await silent.readiness()).toBe('ready')
        relay.pause()
        while ((await silent.readiness()) === 'ready') await Bun.sleep(100) // the kept answer expires, then a probe goes unanswered
        expect(told).toEqual([[false, 'no answer to the probe within 2000 ms']])
        relay.resume()
        // The unanswered probe was given up on with its connection; a new one is answered.
        await waitFor('ready again', async () => (await silent.readiness()) === 'ready')
        expect(told).toEqual([
          [false, 'no answer to the probe within 2000 ms'],
          [true, undefined],
        ])
      }))

    test('connections that stop answering while new ones would be answered (a proxy that lost them): reads, lists and the readiness probe replace them, without a restart', () =>
      throughRelay({ maxConnections: 4, answerTimeoutMs: 500 }, async (relay, stranded) => {
        const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
        const read = () => stranded.find('consumers', record.consumer_id)
        const list = () => stranded.list({ table: 'consumers', scope: customer, where: [{ field: 'consumer_id', in: [record.consumer_id] }], order: 'asc' })
        // Their connections made first.
        expect(await read()).toEqual(record)
        expect((await list()).items).toEqual([record])
        expect(await stranded.readiness()).toBe('ready')
        relay.strand()
        expect(await Promise.resolve(read()).catch((error) => error)).toBeInstanceOf(DatabaseUnavailableError)
        expect(await list().catch((error) => error)).toBeInstanceOf(DatabaseUnavailableError)
        // Then answered again on new connections: the stranded ones are never answered nor closed.
        await waitFor('reads by key answered', async () => (await Promise.resolve(read()).catch(() => undefined)) !== undefined)
        await waitFor('lists answered', async () => (await list().catch(() => undefined)) !== undefined)
        // The probe's first use after the strand (once its kept answer has expired) goes unanswered;
        // the next probe opens a connection of its own.
        await waitFor('the stranded probe given up', async () => (await stranded.readiness()) === 'database_unavailable')
        await waitFor('ready', async () => (await stranded.readiness()) === 'ready')
        // The given-up probe's backend, which the server still kept, is ended, and the instance holds
        // its size (N + 2; a pool's stranded connection still counts in its pool while the pool works).
        const instance = /^keyward [0-9a-f]{8}/.exec((await admin`SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'keyward % probe %' ORDER BY backend_start DESC LIMIT 1`)[0].application_name)![0]
        const held = async () => (await admin`SELECT application_name FROM pg_stat_activity WHERE application_name LIKE ${instance + ' %'} AND application_name NOT LIKE '% check'`).map((row: { application_name: string }) => row.application_name)
        await waitFor('the given-up probe ended', async () => !(await held()).includes(`${instance} probe 1`))
        expect((await held()).length).toBeLessThanOrEqual(4 + 2)
      }))

    test("a transaction whose connection is lost on the way (the server never hears it closed) is ended by the server after the answer timeout: its row locks freed", () =>
      throughRelay({ maxConnections: 4, answerTimeoutMs: 500 }, async (relay, lost) => {
        let release = () => {}
        const gate = new Promise<void>((resolve) => (release = resolve))
        try {
          const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
          const change = lost
            .transaction(async (tx) => {
              await tx.update('consumers', record.consumer_id, { state: 'suspended' })
              await gate
            })
            .catch((error) => error)
          const holding = async () =>
            Number((await admin`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND application_name LIKE 'keyward % main %'`)[0].n)
          await waitFor('the change to hold its row lock', async () => (await holding()) === 1)
          relay.strand()
          expect(await change).toBeInstanceOf(DatabaseUnavailableError)
          await waitFor('the server to end the session', async () => (await holding()) === 0)
          expect((await storage.transaction((tx) => tx.update('consumers', record.consumer_id, { state: 'suspended' }))).state).toBe('suspended')
        } finally {
          release()
        }
      }))

    test('reads late behind a lock held for several answer timeouts (the database at work) keep their pool: nothing replaced, no connection more', async () => {
      const mainPools = async () =>
        new Set((await admin`SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'keyward % main %'`).map((row: { application_name: string }) => row.application_name))
      const before = await mainPools()
      const late = PostgresStorage.connect(db.url, { maxConnections: 4, answerTimeoutMs: 400 })
      try {
        const record = await storage.transaction((tx) => tx.insert('consumers', freshConsumer()))
        expect(await late.find('consumers', record.consumer_id)).toEqual(record)
        const [name] = [...(await mainPools())].filter((each) => !before.has(each))
        expect(name).toMatch(/^keyward [0-9a-f]{8} main 1$/)
        await admin.begin(async (locked) => {
          await locked`LOCK TABLE consumers IN ACCESS EXCLUSIVE MODE`
          // Twelve reads on its three connections: pipelined, the last of each waits for three cancelled before it.
          const reads = await Promise.all(Array.from({ length: 12 }, () => Promise.resolve(late.find('consumers', record.consumer_id)).catch((error) => error)))
          for (const read of reads) expect(read).toBeInstanceOf(DatabaseUnavailableError)
          // Asked outside the lock's transaction: inside it pg_stat_activity is a snapshot taken once.
          await waitFor('the cancelled reads to end', async () => Number((await admin`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = ${name} AND state = 'active'`)[0].n) === 0)
        })
        expect(await late.find('consumers', record.consumer_id)).toEqual(record)
        const after = (await mainPools()).difference(before)
        expect([...after]).toEqual([name])
        expect(Number((await admin`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = ${name}`)[0].n)).toBeLessThanOrEqual(3)
      } finally {
        await late.close()
      }
    })

    test('a server that cannot be reached: reads and transactions are DatabaseUnavailableError', async () => {
      const url = new URL(db.url)
      url.port = '1' // nothing listens there
      const nowhere = PostgresStorage.connect(url.toString())
      try {
        expect(await Promise.resolve(nowhere.find('consumers', crypto.randomUUID())).catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError)
        expect(await nowhere.transaction((tx) => tx.insert('consumers', freshConsumer())).catch((e) => e)).toBeInstanceOf(DatabaseUnavailableError)
      } finally {
        await nowhere.close()
      }
    })
  })
})
