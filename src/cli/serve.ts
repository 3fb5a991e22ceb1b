/** `keyward serve`: bind the port, lock and recover the data dir, initialise it on first run, listen, shut down gracefully. */
import { Store } from '../store/store'
import { acquireDataDirLock, type DataDirLock } from '../store/lock'
import { prepareDataDir } from '../store/data-dir'
import { DATA_FORMAT } from '../store/format'
import { parseDuration } from '../auth/tokens'
import { firstTokenHint, initialiseStorage, isInitialised, untouchedVendor } from './init'
import { EmbeddedStorage } from '../storage/embedded'
import { UsageError, wholeNumber } from './usage'
import { parseOrigin } from '../http/cors'
import { serveDatabase } from './serve-database'
import { checkHost, checkPublicUrl, givesTls, parsePort, readTlsFiles, reservePort, type ReservedPort } from './listen'
import { serveControlSocket } from './control-socket'
import { performTokenCommand } from './token-commands'
import { createLogger, LOG_FORMATS, type LogFormat, type Logger } from '../ops/logger'
import { VERSION } from '../version'
import { listenForSignals, serveUntilStopped, type OpenedStorage, type ServerSettings } from './serving'
import { printFirstToken } from './stdout'

export interface ServeOptions {
  readonly data: string
  /** Database mode (src/cli/serve-database.ts) instead of the data dir. */
  readonly databaseUrl?: string | undefined
  readonly host: string
  readonly port: string
  readonly publicUrl?: string
  /** PEM files: both (HTTPS only) or neither. */
  readonly tlsCert?: string
  readonly tlsKey?: string
  readonly autoVerifyInstallations: boolean
  /** Audit events older than this DURATION are dropped in the background (default 400d). */
  readonly auditRetention: string
  /** Origins allowed to call the API from a browser (`--cors-origin`). */
  readonly corsOrigins?: readonly string[]
  /** Requests per second per token or client address (`--rate-limit`, default 100; 0: off). */
  readonly rateLimit?: string
  /** `json` (default) or `text` (`--log-format`). */
  readonly logFormat?: string
  /** Database mode: how long a request waits for the database's answers before its 503 (`--database-timeout`, default 10s). */
  readonly databaseTimeout?: string
  /** How long a stop waits for the answers in flight before it closes their connections (`--stop-timeout`, default 20s). */
  readonly stopTimeout?: string
  /** Database mode: the connection pool of this instance (`--database-connections`, default 16). */
  readonly databaseConnections?: string
  /** Compact once the log segment passes this many bytes (default 64 MiB; small values for tests). */
  readonly compactAfterBytes?: number
}

/** SIGUSR1: write a snapshot now (before a backup, or to measure one), while serving goes on. */
function snapshotNow(store: Store, logger: Logger): void {
  logger.info('SIGUSR1: writing a snapshot')
  store.compact().then(
    // A snapshot written is logged by the store's `onSnapshot`, like every other.
    (wrote) => (wrote ? undefined : logger.info('the snapshot is already current')),
    (error) => logger.error('snapshot failed', { error: (error as Error).message }),
  )
}

function badOrigin(value: string): never {
  throw new UsageError(`invalid --cors-origin '${value}': give a scheme, host and optional port, like https://console.example.com`)
}

/** A DURATION flag's value in seconds, at most `most` (else bad usage, with an example and the bound). */
function durationSeconds(flag: string, text: string, example: string, most?: { seconds: number; spelled: string }): number {
  const seconds = parseDuration(text)
  if (seconds === null || (most !== undefined && seconds > most.seconds)) {
    throw new UsageError(`invalid --${flag} '${text}': use a number and s, m, h or d, like ${example}${most ? `, at most ${most.spelled}` : ''}`)
  }
  return seconds
}

/** `--rate-limit`: a whole number of requests per second, 0 for none (else bad usage). */
const parseRateLimit = (text: string) => wholeNumber('--rate-limit', text, 0, Number.MAX_SAFE_INTEGER, 'give requests per second, like 100 (0 turns limits off)')

/**
 * `--database-connections`: the pool of each instance, 1 to 1,000 (else bad usage). Each instance
 * holds up to this many (3 at least) and two more (the credential generation's read, the readiness probe), so
 * instances × (N + 2) must stay below the database's `max_connections` (README "Database mode").
 */
const parseDatabaseConnections = (text: string) => wholeNumber('--database-connections', text, 1, 1000, 'give a number of connections from 1 to 1000, like 16')

/** The longest `--database-timeout` and `--stop-timeout`: a day, far below what a timer can hold (2^31 - 1 ms, about 24.8 days). */
const MAX_DATABASE_TIMEOUT = { seconds: 86_400, spelled: '24h' }

function parseLogFormat(text: string): LogFormat {
  if (!LOG_FORMATS.includes(text as LogFormat)) throw new UsageError(`invalid --log-format '${text}': use json or text`)
  return text as LogFormat
}

export async function serveCommand(options: ServeOptions): Promise<number> {
  const port = parsePort(options.port)
  checkHost(options.host)
  if (options.publicUrl !== undefined) checkPublicUrl(options.publicUrl)
  const corsOrigins = (options.corsOrigins ?? []).map((value) => parseOrigin(value.trim()) ?? badOrigin(value))
  const rateLimit = parseRateLimit(options.rateLimit ?? '100')
  const logger = createLogger(parseLogFormat(options.logFormat ?? 'json'))
  const retentionSeconds = durationSeconds('audit-retention', options.auditRetention, '400d')
  const answerTimeoutMs = durationSeconds('database-timeout', options.databaseTimeout ?? '10s', '10s', MAX_DATABASE_TIMEOUT) * 1000
  const maxConnections = parseDatabaseConnections(options.databaseConnections ?? '16')
  const stopTimeoutMs = durationSeconds('stop-timeout', options.stopTimeout ?? '20s', '20s', MAX_DATABASE_TIMEOUT) * 1000
  givesTls(options.tlsCert, options.tlsKey)
  // From here on a signal stops the server gracefully, even while it recovers (src/cli/serving.ts).
  const signals = listenForSignals(logger, Boolean(options.databaseUrl))
  // Said at once (not batched): opening a big data dir takes seconds before the next line (`recovered`).
  logger.info('starting', { version: VERSION, pid: process.pid })
  await logger.flush(LOG_WAIT_MS)
  let reserved: ReservedPort | undefined
  let code = 1
  try {
    const tls = readTlsFiles(options.tlsCert, options.tlsKey)
    // Bound before the data dir (or the database) is touched: a start that cannot listen leaves
    // nothing behind and prints no token (README "Configuration").
    reserved = reservePort(options.host, port)
    // host_url needs the real port, known only once bound (`--port 0` picks a free one); the app
    // reads the config per request, so filling it in right after binding is early enough.
    const config = { publicUrl: options.publicUrl ?? '', autoVerifyInstallations: options.autoVerifyInstallations, corsOrigins }
    const settings: ServerSettings = { host: options.host, publicUrl: options.publicUrl, reserved, tls, config, retentionSeconds, rateLimit, stopTimeoutMs, logger }
    const opened = options.databaseUrl ? await serveDatabase(options.databaseUrl, logger, { answerTimeoutMs, maxConnections }) : await openDataDir(options, logger)
    code = await serveUntilStopped(opened, settings, signals)
  } catch (error) {
    if (error instanceof UsageError) throw error
    // Once the log exists, a failure is one of its lines (a port in use, damage, a dir in use...).
    logger.error('failed', { error: (error as Error)?.message ?? String(error) })
  } finally {
    reserved?.release() // a start that failed: the port is free again
  }
  // A reader of stderr that has stopped reading (a terminal after Ctrl-S, a stuck pipe) gets the
  // last lines for LOG_WAIT_MS, then loses them: its pending write would hold the process forever.
  if (!(await logger.flush(LOG_WAIT_MS))) process.exit(code)
  return code
}

/** How long `serve` waits for a log reader that does not read (docs/operations.md "Logs"). */
const LOG_WAIT_MS = 5_000

/** How often a server notes its clock's time in the lock file: what a kill loses of it at most. */
const CLOCK_NOTE_INTERVAL_MS = 5_000

/** Locks, recovers (and on first run initialises) the data dir, and opens its control socket. */
async function openDataDir(options: ServeOptions, logger: Logger): Promise<OpenedStorage> {
  let lock: DataDirLock | undefined
  let store: Store | undefined
  try {
    await prepareDataDir(options.data)
    lock = acquireDataDirLock(options.data)
    const started = performance.now()
    store = await Store.open(options.data, {
      log: (message) => logger.warn(message),
      // The log holds a write that failed and could not be taken back out: only a restart, which
      // recovers from what is on disk, may go on (docs/operations.md, "Logs"; README "Configuration").
      onFatal: (error) => {
        logger.error('fatal: a failed write could not be removed from the log; exiting (70): restart to recover', { error: (error as Error)?.message ?? String(error) })
        process.exit(70)
      },
      onSnapshot: ({ lsn, bytes, seconds }) => logger.info('snapshot written', { lsn, bytes, duration_ms: Math.round(seconds * 1000) }),
      ...(options.compactAfterBytes ? { compactAfterBytes: options.compactAfterBytes } : {}),
    })
    logger.info('recovered', { data_dir: options.data, duration_ms: Math.round(performance.now() - started) })
    const storage = new EmbeddedStorage(store)
    if (!isInitialised(storage)) {
      printFirstToken(await initialiseStorage(storage, 'Vendor', 'serve'), logger, `--data ${options.data}`, 'a new data dir')
    } else {
      const vendor = await untouchedVendor(storage)
      if (vendor !== undefined) logger.warn(firstTokenHint(vendor, `--data ${options.data}`))
    }
    // The CLI's token commands, while this server is the data dir's only writer (README "Tokens").
    const control = serveControlSocket(options.data, (command) => performTokenCommand(storage, command), logger)
    const [opened, held] = [store, lock]
    // The clock's time, noted in the lock file for a restart (src/store/lock.ts, `recordedTime`).
    const noting = setInterval(() => held.recordTime(), CLOCK_NOTE_INTERVAL_MS)
    noting.unref()
    return {
      storage,
      where: { data_dir: options.data, data_format: DATA_FORMAT },
      stopping: 'finishing requests in flight, writing a snapshot',
      onSigusr1: () => snapshotNow(opened, logger),
      finishInFlight: (timeoutMs) => control?.stop(timeoutMs) ?? Promise.resolve(),
      close: async () => {
        clearInterval(noting)
        try {
          await control?.stop(0)
          await opened.close()
        } finally {
          held.release()
        }
      },
    }
  } catch (error) {
    // Give the dir back in a clean state before reporting the failure.
    await store?.close().catch((closeError) => logger.error('close failed', { error: (closeError as Error).message }))
    lock?.release()
    throw error
  }
}
