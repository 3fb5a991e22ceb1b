/** `keyward serve`: lock the data dir, recover, initialise on first run, listen, shut down gracefully. */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { createApp } from '../app'
import { Store } from '../store/store'
import { acquireDataDirLock } from '../store/lock'
import { SECRET_FILE } from '../store/paths'
import { readSecret } from '../auth/secret'
import { TokenVerifier } from '../auth/tokens'
import { initialiseStorage, isInitialised } from './init'
import { EmbeddedStorage } from '../storage/embedded'
import { UsageError } from './usage'
import { parseOrigin } from '../http/cors'
import { serveDatabase } from './serve-database'

export interface ServeOptions {
  readonly data: string
  /** Database mode (src/cli/serve-database.ts) instead of the data dir. */
  readonly databaseUrl?: string | undefined
  readonly host: string
  readonly port: string
  readonly publicUrl?: string
  readonly autoVerifyInstallations: boolean
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

export async function serveCommand(options: ServeOptions): Promise<number> {
  const port = Number(options.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`invalid port '${options.port}'`)
  const corsOrigins = (options.corsOrigins ?? []).map((value) => parseOrigin(value.trim()) ?? badOrigin(value))
  if (options.databaseUrl) return serveDatabase(options, options.databaseUrl, port)
  await mkdir(options.data, { recursive: true, mode: 0o700 })
  const lock = acquireDataDirLock(options.data)
  let store: Store
  let storage: EmbeddedStorage
  try {
    store = await Store.open(options.data, { log, ...(options.compactAfterBytes ? { compactAfterBytes: options.compactAfterBytes } : {}) })
    storage = new EmbeddedStorage(store)
    if (!isInitialised(storage)) {
      const first = await initialiseStorage(storage, options.data, 'Vendor')
      log('keyward: initialised a new data dir; the vendor admin token is shown once, keep it:')
      process.stdout.write(JSON.stringify(first) + '\n')
    }
  } catch (error) {
    lock.release()
    throw error
  }
  let server: NonNullable<ReturnType<typeof createApp>['server']>
  try {
    const secret = await readSecret(options.data)
    // Initialised without a secret (deleted by hand): no token could ever be checked; refuse.
    if (!secret) throw new Error(`${join(options.data, SECRET_FILE)} is missing: restore it, or write 64 new hex digits there (every token is then void)`)
    // host_url needs the real port, known only once bound (`--port 0` picks a free one); the app
    // reads the config per request, so filling it in right after binding is early enough.
    const config = { publicUrl: options.publicUrl ?? '', autoVerifyInstallations: options.autoVerifyInstallations, corsOrigins }
    const app = createApp({ storage, verifier: new TokenVerifier(secret), config }, log)
    // Elysia's listen hands its routes to Bun's native router: cheaper per request than app.fetch,
    // and immune to Elysia's own path parsing, which breaks on a Host shorter than 4 characters.
    // No port sharing (reusePort), no development error pages. Bun's own body limit only guards
    // memory; bodies over 64 KiB get our 413 problem body.
    app.listen({ hostname: options.host, port, maxRequestBodySize: 16 * 1024 * 1024, development: false, reusePort: false })
    server = app.server!
    const host = options.host.includes(':') ? `[${options.host}]` : options.host
    config.publicUrl ||= `http://${host}:${server.port}`
    log(`keyward: listening on http://${host}:${server.port} (data dir ${options.data})`)
  } catch (error) {
    // Port taken, say: give the dir back in a clean state before reporting it.
    await store.close().catch((closeError) => log(`keyward: ${(closeError as Error).message}`))
    lock.release()
    throw error
  }

  await new Promise<void>((resolve) => {
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
  try {
    await server.stop(false)
    await store.close()
  } finally {
    lock.release()
  }
  log('keyward: stopped')
  return 0
}
