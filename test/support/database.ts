/**
 * Fresh PostgreSQL databases for tests: each test file (or process test) creates its own on the
 * server of KEYWARD_TEST_DATABASE_URL and drops it at the end, so files run in any order and
 * leave nothing behind.
 */
import { SQL } from 'bun'

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
