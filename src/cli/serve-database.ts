/**
 * `keyward serve --database-url`: database mode (CONTRACT section 13, README "Database mode").
 * No data dir and no lock: any number of instances serve one database. Start-up migrates the
 * schema and, on an empty database, initialises it, under the database's advisory lock, so of
 * instances starting together exactly one does it and prints the vendor token.
 */
import { createApp } from '../app'
import { TokenVerifier } from '../auth/tokens'
import { PostgresStorage } from '../storage/postgres'
import { databaseSecret, describeDatabase, prepareDatabase } from './database'
import type { ServeOptions } from './serve'

const log = (line: string) => console.error(line)

export async function serveDatabase(options: ServeOptions, url: string, port: number): Promise<number> {
  const where = describeDatabase(url)
  const storage = PostgresStorage.connect(url)
  let server: NonNullable<ReturnType<typeof createApp>['server']>
  try {
    const first = await prepareDatabase(storage, 'Vendor', false, where)
    if (first) {
      log(`keyward: initialised ${where}; the vendor admin token is shown once, keep it:`)
      process.stdout.write(JSON.stringify(first) + '\n')
    }
    const secret = await databaseSecret(storage, where)
    // As in serve.ts: host_url needs the bound port, and the app reads the config per request.
    const config = { publicUrl: options.publicUrl ?? '', autoVerifyInstallations: options.autoVerifyInstallations }
    const app = createApp({ storage, verifier: new TokenVerifier(secret), config }, log)
    app.listen({ hostname: options.host, port, maxRequestBodySize: 16 * 1024 * 1024, development: false, reusePort: false })
    server = app.server!
    const host = options.host.includes(':') ? `[${options.host}]` : options.host
    config.publicUrl ||= `http://${host}:${server.port}`
    log(`keyward: listening on http://${host}:${server.port} (${where})`)
  } catch (error) {
    await storage.close().catch(() => {})
    throw error
  }

  await new Promise<void>((resolve) => {
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
  await server.stop(false)
  await storage.close()
  log('keyward: stopped')
  return 0
}
