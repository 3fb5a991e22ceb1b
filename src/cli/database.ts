/**
 * Database mode for the commands (README "Database mode"): the
 * `--database-url` option, and the start-up work every command does on a database: connect,
 * migrate or check the schema, initialise once.
 */
import { SQL } from 'bun'
import { PostgresStorage } from '../storage/postgres'
import { DatabaseUnavailableError } from '../storage/postgres/errors'
import { alreadyInitialised, initialiseStorage, isInitialised, type InitResult } from './init'
import { notShown, printSecretLine } from './stdout'
import { performTokenCommand, type TokenCommand, type TokenCommandAnswer } from './token-commands'
import { UsageError } from './usage'

/** The option as `parseArgs` declares it, for every command that can run on a database. */
export const DATABASE_URL_OPTION = {
  type: 'string',
  ...(process.env.KEYWARD_DATABASE_URL ? { default: process.env.KEYWARD_DATABASE_URL } : {}),
} as const

/**
 * A postgres:// or postgresql:// URL that the database client accepts (else bad usage, exit 2: a
 * value that cannot work must not become a failure a service manager restarts); undefined when not
 * given (embedded mode). An empty flag is an error, not embedded mode: `--database-url "$URL"`
 * with URL unset must not give a server a data dir of its own (an empty KEYWARD_DATABASE_URL is
 * unset, as every empty KEYWARD_ variable is).
 */
export function databaseUrlOf(value: unknown): string | undefined {
  if (value === undefined) return undefined
  const text = String(value)
  if (text === '') throw new UsageError('--database-url is empty: give a postgres:// or postgresql:// URL, or leave it out for a data dir')
  let url: URL
  try {
    url = new URL(text)
  } catch {
    if (/^postgres(ql)?:\/\//.test(text)) {
      throw new UsageError('--database-url does not parse as a URL (a Unix socket is postgres:///DATABASE?host=/var/run/postgresql&user=NAME)')
    }
    throw new UsageError('--database-url must be a postgres:// or postgresql:// URL')
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') throw new UsageError('--database-url must be a postgres:// or postgresql:// URL')
  try {
    for (const part of [url.username, url.password, url.pathname]) decodeURIComponent(part)
  } catch {
    throw new UsageError('--database-url has a malformed %-escape in its user, password or database name (a % itself is %25)')
  }
  try {
    // Parsed as the client will (percent-escapes, the port, sslmode and its other parameters); it
    // connects on first use only. Its messages do not quote the URL (a password may be in it).
    void new SQL({ url: text, max: 1 }).close().catch(() => {})
  } catch (error) {
    throw new UsageError(`--database-url does not parse: ${(error as Error).message}`)
  }
  return text
}

/**
 * Never the URL itself in a message: it may carry a password. Named as the client reads the URL
 * (a Unix socket, a port or a database given as its parameters: `?host=/var/run/postgresql`).
 */
export const describeDatabase = (url: string) => {
  const client = new SQL({ url, max: 1 })
  const { hostname, port, database, path } = client.options
  void client.close().catch(() => {})
  return `database ${database || '(default)'} on ${path ? `socket ${path}` : `${hostname}:${port}`}`
}

/** `work`, whose failure to reach the database says which database it is. */
export async function namingDatabase<R>(where: string, work: () => Promise<R>): Promise<R> {
  try {
    return await work()
  } catch (error) {
    if (error instanceof DatabaseUnavailableError) throw new Error(`${where}: ${error.message}`)
    throw error
  }
}

/**
 * Brings the schema up to date and, on a database without a vendor, creates the vendor and its
 * first token: all under the migration lock, so of several instances starting together on an
 * empty database exactly one initialises it (and gets the result; the others get null).
 * `mustBeNew` (init): an initialised database is an error.
 */
export function prepareDatabase(storage: PostgresStorage, vendorDescription: string, mustBeNew: boolean, where: string): Promise<InitResult | null> {
  return storage.underMigrationLock(async () => {
    if (await isInitialised(storage)) {
      if (mustBeNew) throw await alreadyInitialised(storage, where, '--database-url URL')
      return null
    }
    return initialiseStorage(storage, vendorDescription, mustBeNew ? 'init' : 'serve')
  })
}

/** Runs `work` on a small pool to `url`, closed afterwards (the one-shot commands). */
export async function withDatabase<R>(url: string, work: (storage: PostgresStorage) => Promise<R>): Promise<R> {
  const storage = PostgresStorage.connect(url, { maxConnections: 2 })
  try {
    return await namingDatabase(describeDatabase(url), () => work(storage))
  } finally {
    await storage.close()
  }
}

/** `keyward init --database-url`: the schema, the vendor and its token; exit 1 if already initialised. */
export function initDatabaseCommand(url: string, vendorDescription: string): Promise<number> {
  return withDatabase(url, async (storage) => {
    const result = (await prepareDatabase(storage, vendorDescription, true, describeDatabase(url)))!
    printSecretLine(JSON.stringify(result) + '\n', notShown(result.organization_id, '--database-url URL'))
    return 0
  })
}

/**
 * `issue-token` and `tokens list|revoke` with `--database-url`: written to the database directly, in
 * one transaction with its audit event. No server is asked: every instance reads a token's record
 * on every request, so the change holds on the next request to any of them (README "Database mode").
 */
export function runOnDatabase(url: string, command: TokenCommand): Promise<TokenCommandAnswer> {
  return withDatabase(url, async (storage) => {
    await storage.requireCurrentSchema()
    if (!(await isInitialised(storage))) {
      throw new Error(`${describeDatabase(url)} is not initialised: run 'keyward init --database-url ...' or 'keyward serve --database-url ...' first`)
    }
    return performTokenCommand(storage, command)
  })
}
