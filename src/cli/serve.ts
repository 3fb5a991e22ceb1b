/** `keyward serve`: bind the port, lock and recover the data dir, initialise it on first run, listen, shut down gracefully. */
import { createApp } from '../app'
import { Store } from '../store/store'
import { acquireDataDirLock, type DataDirLock } from '../store/lock'
import { prepareDataDir } from '../store/data-dir'
import { parseDuration, TokenVerifier } from '../auth/tokens'
import { initialiseStorage, isInitialised } from './init'
import { EmbeddedStorage } from '../storage/embedded'
import { UsageError } from './usage'
import { parseOrigin } from '../http/cors'
import { serveDatabase } from './serve-database'
import { checkPublicUrl, listenOnReservedPort, parsePort, readTlsFiles, reservePort, wildcardWarning } from './listen'
import { serveControlSocket } from './control-socket'
import { performTokenCommand } from './token-commands'
import { startAuditRetention } from '../modules/audit/retention'

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
  /** Compact once the log segment passes this many bytes (default 64 MiB; small values for tests). */
  readonly compactAfterBytes?: number
}

const log = (line: string) => console.error(line)

/** SIGUSR1: write a snapshot now (before a backup, or to measure one), while serving goes on. */
function snapshotNow(store: Store): void {
  const started = performance.now()
  log('keyward: SIGUSR1: writing a snapshot')
  store.compact().then(
    (wrote) => log(wrote ? `keyward: snapshot written in ${((performance.now() - started) / 1000).toFixed(2)} s` : 'keyward: the snapshot is already current'),
    (error) => log(`keyward: snapshot failed: ${(error as Error).message}`),
  )
}

function badOrigin(value: string): never {
  throw new UsageError(`invalid --cors-origin '${value}': give a scheme, host and optional port, like https://console.example.com`)
}

/** `--audit-retention` in seconds (else bad usage). */
function parseRetention(text: string): number {
  const seconds = parseDuration(text)
  if (seconds === null) throw new UsageError(`invalid --audit-retention '${text}': use a number and s, m, h or d, like 400d`)
  return seconds
}

/** Resolves on the first SIGINT or SIGTERM; SIGUSR1 writes a snapshot meanwhile. */
function stopSignal(store: Store): Promise<void> {
  return new Promise<void>((resolve) => {
    let stopping = false
    const stop = (signal: NodeJS.Signals) => {
      // A repeated signal (a second Ctrl-C, an impatient supervisor) must not kill the shutdown half
      // way, skipping the snapshot and exit code 0. SIGKILL still forces it (the log is safe).
      if (stopping) return log(`keyward: ${signal}: already stopping`)
      stopping = true
      log(`keyward: ${signal}: finishing requests in flight, writing a snapshot`)
      resolve()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
    process.on('SIGUSR1', () => snapshotNow(store))
  })
}

export async function serveCommand(options: ServeOptions): Promise<number> {
  const port = parsePort(options.port)
  if (options.publicUrl !== undefined) checkPublicUrl(options.publicUrl)
  const corsOrigins = (options.corsOrigins ?? []).map((value) => parseOrigin(value.trim()) ?? badOrigin(value))
  const tls = readTlsFiles(options.tlsCert, options.tlsKey)
  const retentionSeconds = parseRetention(options.auditRetention)
  // Bound before the data dir (or the database) is touched: a start that cannot listen leaves
  // nothing behind and prints no token (README "Configuration").
  const reserved = reservePort(options.host, port)
  // host_url needs the real port, known only once bound (`--port 0` picks a free one); the app
  // reads the config per request, so filling it in right after binding is early enough.
  const config = { publicUrl: options.publicUrl ?? '', autoVerifyInstallations: options.autoVerifyInstallations, corsOrigins }
  if (options.databaseUrl) {
    try {
      return await serveDatabase(options, options.databaseUrl, reserved, tls, config, retentionSeconds)
    } finally {
      reserved.release() // a start that failed: the port is free again
    }
  }
  let lock: DataDirLock | undefined
  let store: Store | undefined
  let storage: EmbeddedStorage
  let listening: ReturnType<typeof listenOnReservedPort> | undefined
  let control: ReturnType<typeof serveControlSocket>
  try {
    await prepareDataDir(options.data)
    lock = acquireDataDirLock(options.data)
    store = await Store.open(options.data, { log, ...(options.compactAfterBytes ? { compactAfterBytes: options.compactAfterBytes } : {}) })
    storage = new EmbeddedStorage(store)
    if (!isInitialised(storage)) {
      const first = await initialiseStorage(storage, 'Vendor', 'serve')
      log('keyward: initialised a new data dir; the vendor admin token is shown once, keep it:')
      process.stdout.write(JSON.stringify(first) + '\n')
    }
    listening = listenOnReservedPort(createApp({ storage, verifier: new TokenVerifier(), config }, log), options.host, reserved, tls)
    // The CLI's token commands, while this server is the data dir's only writer (README "Tokens").
    control = serveControlSocket(options.data, (command) => performTokenCommand(storage, command), log)
  } catch (error) {
    // Give the dir back in a clean state before reporting the failure.
    reserved.release()
    listening?.server.stop(true)
    await store?.close().catch((closeError) => log(`keyward: ${(closeError as Error).message}`))
    lock?.release()
    throw error
  }

  const { server, address } = listening
  config.publicUrl ||= address
  const warning = wildcardWarning(options.host, options.publicUrl, address)
  if (warning) log(`keyward: warning: ${warning}`)
  const retention = startAuditRetention(storage, retentionSeconds, log)
  // Listening for signals before saying so: a supervisor may stop us the moment it reads that line.
  const stopRequested = stopSignal(store)
  log(`keyward: listening on ${address} (data dir ${options.data})`)
  await stopRequested
  try {
    await server.stop(false)
    await control?.stop(false)
    await retention.stop()
    await store.close()
  } finally {
    lock.release()
  }
  log('keyward: stopped')
  return 0
}
