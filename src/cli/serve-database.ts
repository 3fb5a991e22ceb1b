/**
 * `keyward serve --database-url`: database mode (README "Database mode").
 * No data dir and no lock: any number of instances serve one database. Start-up migrates the
 * schema and, on an empty database, initialises it, under the database's advisory lock, so of
 * instances starting together exactly one does it and prints the vendor token. There is no control
 * socket: the CLI's token commands write to the database themselves, and every instance reads a
 * token's record on every request (README "Database mode").
 */
import { PostgresStorage, type PostgresOptions } from '../storage/postgres'
import { SCHEMA_VERSION } from '../storage/postgres/schema'
import type { Logger } from '../ops/logger'
import { describeDatabase, namingDatabase, prepareDatabase } from './database'
import type { OpenedStorage } from './serving'
import { printFirstToken } from './stdout'
import { firstTokenHint, untouchedVendor } from './init'

/** Connects, migrates and on an empty database initialises it. */
export async function serveDatabase(url: string, logger: Logger, options: PostgresOptions = {}): Promise<OpenedStorage> {
  const where = describeDatabase(url)
  const storage = PostgresStorage.connect(url, options)
  storage.observeReadiness((reachable, reason) =>
    reachable ? logger.info('database ready again', { database: where }) : logger.warn('database not ready', { database: where, error: reason }),
  )
  try {
    const started = performance.now()
    const first = await namingDatabase(where, () => prepareDatabase(storage, 'Vendor', false, where))
    logger.info('database ready', { database: where, duration_ms: Math.round(performance.now() - started) })
    if (first) printFirstToken(first, logger, '--database-url URL', where)
    else {
      const vendor = await untouchedVendor(storage)
      if (vendor !== undefined) logger.warn(firstTokenHint(vendor, '--database-url URL'))
    }
  } catch (error) {
    await storage.close().catch(() => {})
    throw error
  }
  return {
    storage,
    where: { database: where, schema_version: SCHEMA_VERSION },
    stopping: 'finishing requests in flight',
    // The embedded store's "snapshot now": nothing to do here, but not the process's end either.
    onSigusr1: () => logger.info('SIGUSR1: no snapshot in database mode (backups are the database\'s); nothing done'),
    close: () => storage.close(),
  }
}
