/**
 * What `serve` does once its storage is open, in either mode (src/cli/serve.ts: a data dir;
 * src/cli/serve-database.ts: a database): make the app, listen on the reserved port, announce it,
 * run audit retention, and stop gracefully on SIGINT, SIGTERM or SIGHUP (`listenForSignals`, from the
 * start of `serve`). Its log: src/ops/logger.ts.
 */
import { readFileSync } from 'node:fs'
import { createApp } from '../app'
import { TokenVerifier } from '../auth/tokens'
import { Metrics } from '../ops/metrics'
import { RateLimiter } from '../ops/rate-limit'
import type { Logger, LogFields } from '../ops/logger'
import type { Storage } from '../storage/storage'
import { startAuditRetention } from '../modules/audit/retention'
import { settledWithin } from '../ops/deadline'
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
  /** How long a stop waits for the answers in flight (`--stop-timeout`): see `finishInFlight`. */
  readonly stopTimeoutMs: number
  readonly logger: Logger
}

/** The open storage of one mode and what differs between the modes. */
export interface OpenedStorage {
  readonly storage: Storage
  /** Fields naming where the data is, for the start-up line (`data_dir`, or `database`). */
  readonly where: LogFields
  /** What the stop line says is being done. */
  readonly stopping: string
  /** What SIGUSR1 does while serving (a snapshot, in embedded mode). */
  readonly onSigusr1: () => void
  /**
   * Stops what else takes requests (the embedded mode's control socket), letting those in flight
   * finish for `timeoutMs` at most: done beside the API's stop, within the same `--stop-timeout`.
   */
  readonly finishInFlight?: (timeoutMs: number) => Promise<void>
  /** Closes the storage and whatever else the mode holds (the lock, the control socket). */
  close(): Promise<void>
}

/**
 * Serves until SIGINT, SIGTERM or SIGHUP, then stops gracefully; the exit code. A stop asked for
 * while the storage was opened (`signals`) is done now, without serving.
 */
export async function serveUntilStopped(opened: OpenedStorage, settings: ServerSettings, signals: ServeSignals): Promise<number> {
  const { storage } = opened
  const { logger, config } = settings
  signals.serving(opened)
  if (signals.stopRequested) {
    await opened.close()
    logger.info('stopped')
    return 0
  }
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
  logger.info('listening', {
    address,
    version: VERSION,
    ...opened.where,
    records: await storage.recordCounts(),
    rate_limit: settings.rateLimit,
    audit_retention_seconds: settings.retentionSeconds,
  })
  await signals.stopped
  try {
    await Promise.all([finishInFlight(server, settings.stopTimeoutMs, logger), opened.finishInFlight?.(settings.stopTimeoutMs)])
    await retention.stop()
  } finally {
    await opened.close()
  }
  logger.info('stopped')
  return 0
}

/**
 * Stops taking connections and lets the answers in flight finish, for `timeoutMs` at most; then
 * closes the connections still answering. A long list read slowly by its client (44 MB at 165 KB/s)
 * held a stop for 264 s, past what a service manager waits before it kills the process
 * (deploy/keyward.service: TimeoutStopSec=120), with the snapshot still to write. Every change an
 * answer reports is durable before the answer is sent: closing a connection loses no change.
 */
async function finishInFlight(server: { stop(closeActive?: boolean): Promise<void>; readonly pendingRequests: number }, timeoutMs: number, logger: Logger): Promise<void> {
  if (await settledWithin(server.stop(false), timeoutMs)) return
  logger.warn(`stop: answers still in flight after ${timeoutMs / 1000} s (--stop-timeout): their connections are closed`, { pending: server.pendingRequests })
  await server.stop(true)
}

/** The signals of a `serve`, listened to from its start (`listenForSignals`). */
export interface ServeSignals {
  /** Resolves on the first SIGINT, SIGTERM or SIGHUP. */
  readonly stopped: Promise<void>
  readonly stopRequested: boolean
  /** The storage is open: what a stop says it does, and what SIGUSR1 does, from now on. */
  serving(opened: OpenedStorage): void
}

/**
 * Listens for the signals of `serve` from its first moment: their default action kills the process,
 * and opening a big data dir takes seconds (a million records: README "Performance"), during which a
 * supervisor's SIGTERM or a backup script's SIGUSR1 must not kill it. A stop asked for then is done
 * as soon as the storage is open (`serveUntilStopped`); a SIGUSR1 then is logged and does nothing
 * (the snapshot it asks for is written by the start itself, or by the stop). With `exitWhileStarting`
 * (database mode) a stop before the storage is open ends the process at once, exit 0: its start may
 * wait without end (for another instance's migration lock), and nothing of it needs finishing (its
 * migration and initialisation are transactions, rolled back with the connection).
 */
export function listenForSignals(logger: Logger, exitWhileStarting: boolean): ServeSignals {
  let stopRequested = false
  let opened: OpenedStorage | undefined
  let resolveStopped: () => void = () => {}
  const stopped = new Promise<void>((resolve) => (resolveStopped = resolve))
  const stop = (signal: NodeJS.Signals) => {
    // A repeated signal (a second Ctrl-C, an impatient supervisor) must not kill the shutdown half
    // way, skipping the snapshot and exit code 0. SIGKILL still forces it (the log is safe).
    if (stopRequested) return logger.info(`${signal}: already stopping`, { signal })
    stopRequested = true
    if (!opened && exitWhileStarting) {
      logger.info(`${signal}: stopping now, before the database is ready (nothing was served)`, { signal })
      // At once: waiting for the log here would let the start go on (migrate, initialise, print a
      // token) meanwhile. The log's waiting lines are written on exit, unless a write is still on
      // its way to a reader that does not read (src/ops/logger.ts).
      process.exit(0)
    }
    logger.info(`${signal}: ${opened ? opened.stopping : 'stopping as soon as the storage is open'}`, { signal })
    resolveStopped()
  }
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
  // A hangup (the terminal closed, a supervisor's stop) stops like SIGTERM: the log's waiting
  // lines and the snapshot are written, instead of the process dying where it stands. Unless it
  // was ignored when we started (`nohup`): a handler would undo that.
  if (!ignoredAtStart('SIGHUP')) process.on('SIGHUP', stop)
  process.on('SIGUSR1', () => (opened ? opened.onSigusr1() : logger.info('SIGUSR1: still starting; nothing done', { signal: 'SIGUSR1' })))
  return {
    stopped,
    get stopRequested() {
      return stopRequested
    },
    serving: (storage) => void (opened = storage),
  }
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
