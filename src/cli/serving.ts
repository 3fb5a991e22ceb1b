/**
 * What `serve` does once its storage is open, in either mode (src/cli/serve.ts: a data dir;
 * src/cli/serve-database.ts: a database): make the app, listen on the reserved port, announce it,
 * run audit retention, and stop gracefully on SIGINT, SIGTERM or SIGHUP. Its log: src/ops/logger.ts.
 */
import { readFileSync } from 'node:fs'
import { createApp } from '../app'
import { TokenVerifier } from '../auth/tokens'
import { Metrics } from '../ops/metrics'
import { RateLimiter } from '../ops/rate-limit'
import type { Logger, LogFields } from '../ops/logger'
import type { Storage } from '../storage/storage'
import { startAuditRetention } from '../modules/audit/retention'
import { VERSION } from '../version'
import { listenOnReservedPort, wildcardWarning, type ReservedPort, type TlsFiles } from './listen'

/** The config the app reads per request; `publicUrl` is filled in once the port is bound. */
export interface ServerConfig {
  publicUrl: string
  readonly autoVerifyInstallations: boolean
  readonly corsOrigins: readonly string[]
}

/** How `serve` was asked to listen and behave (checked already). */
export interface ServerSettings {
  readonly host: string
  /** As given: only whether it was given matters here (the wildcard warning). */
  readonly publicUrl: string | undefined
  readonly reserved: ReservedPort
  readonly tls: TlsFiles | undefined
  readonly config: ServerConfig
  readonly retentionSeconds: number
  /** Requests per second per token or address; 0: no limits. */
  readonly rateLimit: number
  readonly logger: Logger
}

/** The open storage of one mode and what differs between the modes. */
export interface OpenedStorage {
  readonly storage: Storage
  /** Fields naming where the data is, for the start-up line (`data_dir`, or `database`). */
  readonly where: LogFields
  /** What the stop line says is being done. */
  readonly stopping: string
  /** Other signals and what they do (SIGUSR1: a snapshot, in embedded mode). */
  readonly signals?: Partial<Record<NodeJS.Signals, () => void>>
  /** Closes the storage and whatever else the mode holds (the lock, the control socket). */
  close(): Promise<void>
}

/** Serves until SIGINT, SIGTERM or SIGHUP, then stops gracefully; the exit code. */
export async function serveUntilStopped(opened: OpenedStorage, settings: ServerSettings): Promise<number> {
  const { storage } = opened
  const { logger, config } = settings
  let listening: ReturnType<typeof listenOnReservedPort>
  try {
    const app = createApp({
      storage,
      verifier: new TokenVerifier(),
      config,
      logger,
      metrics: new Metrics(),
      rateLimiter: settings.rateLimit > 0 ? new RateLimiter(settings.rateLimit) : null,
    })
    listening = listenOnReservedPort(app, settings.host, settings.reserved, settings.tls)
  } catch (error) {
    // Give the storage back in a clean state before reporting the failure.
    await opened.close().catch((closeError) => logger.error('close failed', { error: (closeError as Error)?.message ?? String(closeError) }))
    throw error
  }
  const { server, address } = listening
  config.publicUrl ||= address
  const warning = wildcardWarning(settings.host, settings.publicUrl, address)
  if (warning) logger.warn(warning)
  // Every instance of database mode runs it too: each batch skips rows another instance is deleting.
  const retention = startAuditRetention(storage, settings.retentionSeconds, logger)
  // Listening for signals before saying so: a supervisor may stop us the moment it reads that line.
  const stopRequested = stopSignal(logger, opened)
  logger.info('listening', {
    address,
    version: VERSION,
    ...opened.where,
    records: await storage.recordCounts(),
    rate_limit: settings.rateLimit,
    audit_retention_seconds: settings.retentionSeconds,
  })
  await stopRequested
  try {
    await server.stop(false)
    await retention.stop()
  } finally {
    await opened.close()
  }
  logger.info('stopped')
  return 0
}

/** Resolves on the first SIGINT, SIGTERM or SIGHUP; the mode's other signals meanwhile. */
function stopSignal(logger: Logger, opened: OpenedStorage): Promise<void> {
  return new Promise<void>((resolve) => {
    let stopping = false
    const stop = (signal: NodeJS.Signals) => {
      // A repeated signal (a second Ctrl-C, an impatient supervisor) must not kill the shutdown half
      // way, skipping the snapshot and exit code 0. SIGKILL still forces it (the log is safe).
      if (stopping) return logger.info(`${signal}: already stopping`, { signal })
      stopping = true
      logger.info(`${signal}: ${opened.stopping}`, { signal })
      resolve()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
    // A hangup (the terminal closed, a supervisor's stop) stops like SIGTERM: the log's waiting
    // lines and the snapshot are written, instead of the process dying where it stands. Unless it
    // was ignored when we started (`nohup`): a handler would undo that.
    if (!ignoredAtStart('SIGHUP')) process.on('SIGHUP', stop)
    for (const [signal, action] of Object.entries(opened.signals ?? {})) process.on(signal, action)
  })
}

/** Signal numbers, of the signals asked about (`ignoredAtStart`). */
const SIGNAL_NUMBERS = { SIGHUP: 1 } as const

/**
 * Whether `signal` was ignored when this process started (set so by its parent, like `nohup`
 * does): Linux's /proc/self/status lists them (`SigIgn`, a bit per signal). Elsewhere: false.
 */
function ignoredAtStart(signal: keyof typeof SIGNAL_NUMBERS): boolean {
  const mask = ignoredMask()
  return mask !== undefined && (mask & (1n << BigInt(SIGNAL_NUMBERS[signal] - 1))) !== 0n
}

function ignoredMask(): bigint | undefined {
  try {
    const hex = /^SigIgn:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]
    return hex === undefined ? undefined : BigInt(`0x${hex}`)
  } catch {
    return undefined
  }
}
