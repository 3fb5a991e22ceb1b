/**
 * `keyward serve --database-url`: database mode (CONTRACT section 13, README "Database mode").
 * No data dir and no lock: any number of instances serve one database. Start-up migrates the
 * schema and, on an empty database, initialises it, under the database's advisory lock, so of
 * instances starting together exactly one does it and prints the vendor token. There is no control
 * socket: the CLI's token commands write to the database themselves, and every instance reads a
 * token's record on every request (README "Database mode").
 */
import { createApp } from '../app'
import { TokenVerifier } from '../auth/tokens'
import { PostgresStorage } from '../storage/postgres'
import { startAuditRetention } from '../modules/audit/retention'
import { describeDatabase, prepareDatabase } from './database'
import type { ServeOptions } from './serve'
import { listenOnReservedPort, wildcardWarning, type ReservedPort, type TlsFiles } from './listen'

const log = (line: string) => console.error(line)

export async function serveDatabase(
  options: ServeOptions,
  url: string,
  reserved: ReservedPort,
  tls: TlsFiles | undefined,
  /** As in serve.ts; `publicUrl` is filled in once the port is bound. */
  config: { publicUrl: string; autoVerifyInstallations: boolean; corsOrigins: readonly string[] },
  retentionSeconds: number,
): Promise<number> {
  const where = describeDatabase(url)
  const storage = PostgresStorage.connect(url)
  let listening: ReturnType<typeof listenOnReservedPort>
  try {
    const first = await prepareDatabase(storage, 'Vendor', false, where)
    if (first) {
      log(`keyward: initialised ${where}; the vendor admin token is shown once, keep it:`)
      process.stdout.write(JSON.stringify(first) + '\n')
    }
    listening = listenOnReservedPort(createApp({ storage, verifier: new TokenVerifier(), config }, log), options.host, reserved, tls)
  } catch (error) {
    await storage.close().catch(() => {})
    throw error
  }
  const { server, address } = listening
  config.publicUrl ||= address
  const warning = wildcardWarning(options.host, options.publicUrl, address)
  if (warning) log(`keyward: warning: ${warning}`)
  // Every instance runs it: each batch is one DELETE that skips rows another instance is deleting.
  const retention = startAuditRetention(storage, retentionSeconds, log)

  // Listening for signals before saying so (as in serve.ts).
  const stopRequested = new Promise<void>((resolve) => {
    let stopping = false
    const stop = (signal: NodeJS.Signals) => {
      if (stopping) return log(`keyward: ${signal}: already stopping`)
      stopping = true
      log(`keyward: ${signal}: finishing requests in flight`)
      resolve()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
  log(`keyward: listening on ${address} (${where})`)
  await stopRequested
  await server.stop(false)
  await retention.stop()
  await storage.close()
  log('keyward: stopped')
  return 0
}
