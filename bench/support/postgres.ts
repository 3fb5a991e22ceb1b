/**
 * The local PostgreSQL server as the benchmarks use it: databases made and dropped through an
 * administrative connection (the URL of `--database-url`, default the postgres user on
 * 127.0.0.1:5432, trust authentication), working copies of a cached database made from it as a
 * template, pgbench runs and their figures, and the server's processes (for their CPU time).
 */
import { SQL } from 'bun'
import type { Subprocess } from 'bun'
import { WRK_THREADS, type WrkResult } from './wrk'

export const DEFAULT_ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres'

/** The URL of database `name` on the server of `adminUrl`. */
export function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  return url.toString()
}

/** A database name the benchmarks make: lowercase letters, digits and underscores only (it goes into SQL text). */
const checkedName = (name: string) => {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a database name the benchmarks make: ${name}`)
  return name
}

/** Runs `work` on one connection to the server's administrative database, closed afterwards. */
async function asAdmin<R>(adminUrl: string, work: (sql: SQL) => Promise<R>): Promise<R> {
  const sql = new SQL({ url: adminUrl, max: 1, connectionTimeout: 10 })
  try {
    return await work(sql)
  } finally {
    await sql.close({ timeout: 5 })
  }
}

/** Whether PostgreSQL answers on `adminUrl`; the error message when it does not. */
export async function reachable(adminUrl: string): Promise<string | null> {
  try {
    await asAdmin(adminUrl, (sql) => sql`SELECT 1`)
    return null
  } catch (error) {
    return (error as Error)?.message ?? String(error)
  }
}

/**
 * Whether database `name` holds organization `organizationId`: a cached data set's database that
 * another checkout's benchmark built again under the same name holds other records.
 */
export async function databaseHolds(adminUrl: string, name: string, organizationId: string): Promise<boolean> {
  const sql = new SQL({ url: databaseUrl(adminUrl, checkedName(name)), max: 1 })
  try {
    return (await sql`SELECT 1 FROM organizations WHERE organization_id = ${organizationId}::uuid`).length > 0
  } catch {
    return false // no such database, or no keyward schema in it
  } finally {
    await sql.close()
  }
}

/** A new empty database, or (with `template`) a copy of one nobody is connected to. */
export async function createDatabase(adminUrl: string, name: string, template?: string): Promise<void> {
  // FILE_COPY copies the template's files (with a checkpoint) instead of writing every page
  // through the write-ahead log: seconds rather than minutes for a database of a few GB.
  const from = template ? ` TEMPLATE ${checkedName(template)} STRATEGY FILE_COPY` : ''
  await asAdmin(adminUrl, (sql) => sql.unsafe(`CREATE DATABASE ${checkedName(name)}${from}`))
}

/** Drops a database, ending its sessions first (a server the benchmark killed may leave some behind briefly). */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  await asAdmin(adminUrl, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${checkedName(name)} WITH (FORCE)`))
}

/** Runs statements on database `url` (one connection, closed afterwards). */
export async function onDatabase<R>(url: string, work: (sql: SQL) => Promise<R>): Promise<R> {
  return asAdmin(url, work)
}

/** `pg_database_size` of a database, bytes. */
export async function databaseBytes(adminUrl: string, name: string): Promise<number> {
  return asAdmin(adminUrl, async (sql) => Number((await sql`SELECT pg_database_size(${checkedName(name)}) AS bytes`)[0].bytes))
}

/** The server's version line, e.g. "PostgreSQL 15.20". */
export async function serverVersion(adminUrl: string): Promise<string> {
  return asAdmin(adminUrl, async (sql) => `PostgreSQL ${(await sql`SHOW server_version`)[0].server_version}`.replace(/ \(.*$/, ''))
}

/** Settings that decide what a durable write costs, for the report. */
export async function durabilitySettings(adminUrl: string): Promise<string> {
  return asAdmin(adminUrl, async (sql) => {
    const rows = await sql`SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'commit_delay', 'shared_buffers', 'max_connections') ORDER BY name`
    return (rows as { name: string; setting: string }[]).map((r) => `${r.name}=${r.setting}`).join(', ')
  })
}

/**
 * The PostgreSQL processes that work for `databases`: their backends (pgbench's, keyward's, their
 * autovacuum workers) and the server's own background processes (WAL writer, checkpointer...), but
 * not the backends of other databases, which other sessions on a shared server may be using: those
 * count as other load. Asked of pg_stat_activity on one connection, kept until `close`.
 */
export function databaseProcesses(adminUrl: string, databases: readonly string[]): { pids(): Promise<number[]>; close(): Promise<void> } {
  const sql = new SQL({ url: adminUrl, max: 1, connectionTimeout: 10 })
  return {
    pids: async () => {
      const rows = await sql`SELECT pid FROM pg_stat_activity WHERE datname = ANY(${databases}::text[]) OR (datname IS NULL AND backend_type <> 'client backend')`
      return (rows as { pid: number }[]).map((r) => r.pid)
    },
    close: () => sql.close({ timeout: 5 }),
  }
}

export function findPgbench(): string | null {
  return Bun.which('pgbench')
}

export const PGBENCH_MISSING =
  'pgbench is not on the PATH. Install it with:\n\n  apt-get update && apt-get install -y postgresql-client      (Debian, Ubuntu)\n'

/** pgbench's figures in wrk's shape, so that both sides of a comparison are measured alike. */
export type PgbenchResult = WrkResult

/**
 * Starts pgbench with a custom script on database `url`: `clients` connections, the extended
 * protocol with prepared statements (as keyward's client prepares each statement once per
 * connection), as many threads as wrk gets, no vacuum. `define` sets the script's variables.
 */
export function startPgbench(
  pgbench: string,
  url: string,
  options: { script: string; clients: number; seconds: number; define?: Record<string, string>; spawn?: (cmd: string[], o: Parameters<typeof Bun.spawn>[1]) => Subprocess },
): { proc: Subprocess; result: Promise<PgbenchResult> } {
  const threads = Math.max(1, Math.min(WRK_THREADS, options.clients))
  const defines = Object.entries(options.define ?? {}).flatMap(([name, value]) => ['-D', `${name}=${value}`])
  const spawn = options.spawn ?? Bun.spawn
  const cmd = [pgbench, '-n', '-M', 'prepared', '-c', String(options.clients), '-j', String(threads), '-T', String(options.seconds), '-f', options.script, ...defines, url]
  const proc = spawn(cmd, { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
  const result = (async () => {
    const [out, err, code] = await Promise.all([new Response(proc.stdout as ReadableStream).text(), new Response(proc.stderr as ReadableStream).text(), proc.exited])
    // No tps line but a count: it processed nothing in its time (64 connections can take longer than a short run to open).
    if (code !== 0 || !/tps = |number of transactions actually processed: /.test(out)) {
      throw new Error(`pgbench failed (exit ${code}): ${(err || out).trim().split('\n').at(-1) ?? ''}\n${out}${err}`)
    }
    return parsePgbench(out, options.seconds)
  })()
  return { proc, result }
}

/** pgbench's summary → the figures a wrk run gives (latency percentiles: not reported by pgbench). */
export function parsePgbench(out: string, seconds: number): PgbenchResult {
  const requests = Number(/number of transactions actually processed: (\d+)/.exec(out)?.[1] ?? 0)
  const failed = Number(/number of failed transactions: (\d+)/.exec(out)?.[1] ?? 0)
  return {
    seconds,
    requests,
    rps: Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(out)?.[1] ?? 0),
    meanMs: Number(/latency average = ([\d.]+) ms/.exec(out)?.[1] ?? NaN),
    p99Ms: NaN,
    p999Ms: NaN,
    maxMs: NaN,
    non2xx: failed,
    timeouts: 0,
    socketErrors: 0,
    output: out,
  }
}
