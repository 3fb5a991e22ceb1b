/**
 * Fresh PostgreSQL databases for tests: each test file (or process test) creates its own on the
 * server of KEYWARD_TEST_DATABASE_URL and drops it at the end, so files run in any order and
 * leave nothing behind.
 */
import { SQL } from 'bun'
import { spawnSync } from 'node:child_process'
import { chownSync } from 'node:fs'
import { tempDir } from './temp-dirs'
import { join } from 'node:path'

/** The server the database tests use: a maintenance database on it, from which others are created. */
export const TEST_DATABASE_URL = process.env.KEYWARD_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres'

/** The store the HTTP tests run on: `postgres` when KEYWARD_TEST_STORE says so. */
export const TEST_STORE: 'embedded' | 'postgres' = process.env.KEYWARD_TEST_STORE === 'postgres' ? 'postgres' : 'embedded'

/**
 * Whether the database tests can run: the server answers. Where they must run (CI sets
 * KEYWARD_TEST_REQUIRE_DATABASE=1), an unreachable server fails the file instead of skipping it.
 */
export async function databaseTestsCanRun(): Promise<boolean> {
  if (await databaseReachable()) return true
  if (process.env.KEYWARD_TEST_REQUIRE_DATABASE === '1') throw new Error(`no PostgreSQL answers at ${redacted(TEST_DATABASE_URL)}, and KEYWARD_TEST_REQUIRE_DATABASE=1`)
  return false
}

/** The URL without its password, for messages. */
export function redacted(url: string): string {
  const parsed = new URL(url)
  if (parsed.password) parsed.password = '***'
  return parsed.toString()
}

/** Whether the server answers. */
export async function databaseReachable(url = TEST_DATABASE_URL): Promise<boolean> {
  const sql = new SQL({ url, max: 1, connectionTimeout: 3 })
  try {
    await sql`SELECT 1`
    return true
  } catch {
    return false
  } finally {
    await sql.close()
  }
}

export interface TestDatabase {
  readonly url: string
  /** Drops the database, ending any connection still open on it. */
  drop(): Promise<void>
}

/** A new, empty database; its URL is the server's with the new name as path. */
export async function createTestDatabase(prefix = 'keyward_test'): Promise<TestDatabase> {
  const name = `${prefix}_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`
  const admin = new SQL({ url: TEST_DATABASE_URL, max: 1 })
  try {
    await admin.unsafe(`CREATE DATABASE ${name}`)
  } finally {
    await admin.close()
  }
  const url = new URL(TEST_DATABASE_URL)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    async drop() {
      const admin = new SQL({ url: TEST_DATABASE_URL, max: 1 })
      try {
        await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } finally {
        await admin.close()
      }
    },
  }
}

/** A TCP relay to a database server that can stop relaying without closing anything (`pause`). */
export interface PausableRelay {
  /** `url` with the relay's address instead of the server's. */
  readonly url: string
  /** From now on, bytes and closes in either direction are held, not relayed: a database that hangs. */
  pause(): void
  /** Relays what was held, in order, and everything after it. */
  resume(): void
  /** From now on, the database's answers reach keyward `ms` later (0: at once again): a slow database, or a far one. */
  delayAnswers(ms: number): void
  /**
   * The connections open now relay nothing more, either way, and are never closed; new ones are
   * relayed as before: a proxy or a NAT that lost its connections without telling either end.
   */
  strand(): void
  /** The most connections that were open through the relay at one time. */
  readonly peakConnections: number
  close(): void
}

/**
 * A database that accepts connections but does not answer, made on demand: a relay on a free local
 * port to `url`'s server. For the small exchanges of tests: a write the kernel takes only in part
 * is not retried.
 */
export function pausableRelay(url: string): PausableRelay {
  const server = new URL(url)
  let paused = false
  let answerDelayMs = 0
  const held: (() => void)[] = []
  type Side = { upstream?: { write(bytes: Uint8Array): number; end(): void }; early: Uint8Array[]; stranded?: boolean }
  const relay = (side: Side, step: () => void): void => {
    if (side.stranded) return
    if (paused) held.push(() => relay(side, step))
    else step()
  }
  const open = new Set<{ end(): void }>()
  const clientSides = new Set<Side>()
  let clients = 0
  let peakConnections = 0
  const listener = Bun.listen<Side>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(client) {
        client.data = { early: [] }
        clientSides.add(client.data)
        open.add(client)
        peakConnections = Math.max(peakConnections, ++clients)
        Bun.connect({
          hostname: server.hostname,
          port: Number(server.port || 5432),
          socket: {
            open(upstream) {
              open.add(upstream)
              client.data.upstream = upstream
              for (const bytes of client.data.early.splice(0)) upstream.write(bytes)
            },
            data(_, chunk) {
              const bytes = new Uint8Array(chunk)
              // Timers of one delay run in the order they were set: the bytes stay in order.
              if (answerDelayMs > 0) setTimeout(() => relay(client.data, () => client.write(bytes)), answerDelayMs)
              else relay(client.data, () => client.write(bytes))
            },
            close() {
              relay(client.data, () => client.end())
            },
            error() {
              if (!client.data.stranded) client.end()
            },
          },
        }).catch(() => client.end())
      },
      data(client, chunk) {
        const bytes = new Uint8Array(chunk)
        relay(client.data, () => {
          if (client.data.upstream) client.data.upstream.write(bytes)
          else client.data.early.push(bytes)
        })
      },
      close(client) {
        clients--
        clientSides.delete(client.data)
        relay(client.data, () => client.data.upstream?.end())
      },
      error(client) {
        client.data.upstream?.end()
      },
    },
  })
  const relayed = new URL(url)
  relayed.hostname = '127.0.0.1'
  relayed.port = String(listener.port)
  return {
    url: relayed.toString(),
    pause: () => void (paused = true),
    delayAnswers: (ms) => void (answerDelayMs = ms),
    strand() {
      for (const side of clientSides) side.stranded = true
    },
    get peakConnections() {
      return peakConnections
    },
    resume() {
      paused = false
      for (const step of held.splice(0)) step()
    },
    close() {
      listener.stop(true)
      for (const socket of open) socket.end()
    },
  }
}

/** A PostgreSQL server of a test's own (`privatePostgres`): stopped and started at will. */
export interface PrivatePostgres {
  /** Its `postgres` database, as the trusted user `postgres`. */
  readonly url: string
  stop(): Promise<void>
  start(): Promise<void>
  /** Stops it (if it runs) and removes its files. */
  close(): Promise<void>
}

/** How `privatePostgres` runs PostgreSQL's programs here, or null where it cannot. */
interface PostgresPrograms {
  readonly bindir: string
  /** As root: the `postgres` user's ids (the server refuses to run as root). */
  readonly runAs: { readonly uid: number; readonly gid: number } | null
}

/**
 * Whether a test may start a PostgreSQL server of its own (`privatePostgres`): the server programs
 * are installed (`pg_config --bindir`), and as root there is a `postgres` user to run them as.
 * Starts nothing: for `describe.skipIf` at a file's load.
 */
export function postgresPrograms(): PostgresPrograms | null {
  if (!Bun.which('pg_config')) return null
  const bindir = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' }).stdout.trim()
  if (!bindir || Bun.file(join(bindir, 'pg_ctl')).size === 0) return null
  if (process.getuid?.() !== 0) return { bindir, runAs: null }
  const id = (flag: string) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' })
  const [uid, gid] = [id('-u'), id('-g')]
  if (!Bun.which('runuser') || uid.status !== 0 || gid.status !== 0) return null
  return { bindir, runAs: { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) } }
}

/**
 * A PostgreSQL server of the test's own: `initdb` into a temp dir (removed after the run like every
 * `tempDir`), on a free port, sockets in its dir. For a test that restarts the database: stopping
 * the machine's server would break every other run using it. Start it in the `beforeAll` of the
 * tests that use it (a describe whose tests are all filtered out runs neither hook) and `close` it
 * in their `afterAll`. A start that fails stops what it started.
 */
export async function privatePostgres(programs: PostgresPrograms): Promise<PrivatePostgres> {
  const dir = tempDir('keyward-private-pg-')
  if (programs.runAs) chownSync(dir, programs.runAs.uid, programs.runAs.gid)
  const data = join(dir, 'data')
  const program = (name: string, args: string[]) => {
    const path = join(programs.bindir, name)
    const command = programs.runAs ? ['runuser', '-u', 'postgres', '--', path, ...args] : [path, ...args]
    const result = spawnSync(command[0]!, command.slice(1), { encoding: 'utf8' })
    if (result.status !== 0) throw new Error(`${name} ${args.join(' ')}: ${result.stderr || result.stdout}`)
  }
  const port = await freePort()
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`
  const start = async () => program('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', options, '-w', 'start'])
  const stop = async () => program('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop'])
  let running = false
  const close = async () => {
    // pg_ctl stop of a server that is not running fails: nothing to stop.
    await stop().catch(() => {})
    running = false
  }
  try {
    program('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync'])
    await start()
    running = true
  } catch (error) {
    await close()
    throw error
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    stop: async () => {
      await stop()
      running = false
    },
    start: async () => {
      await start()
      running = true
    },
    close: async () => {
      if (running) await close()
    },
  }
}

/** A TCP port nothing listens on now. */
async function freePort(): Promise<number> {
  const server = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
  const port = server.port
  server.stop(true)
  return port
}
