/**
 * Data sets for the benchmarks, made the way keyward makes its own: `keyward init` creates the
 * store and its vendor, then the records go in THROUGH THE STORAGE INTERFACE (src/storage/storage.ts:
 * `storage.transaction` with `tx.insert`, about 1,000 rows a transaction, several in flight), shaped
 * as the services make them, on either store. So a server later starts from a data dir, or a
 * database, exactly like one it wrote itself. Optionally the same records go to a json-server db.json.
 *
 * A million records take a minute or more to build: each data set is built once and kept, in
 * bench/.cache/ (git-ignored; a data dir, or a database on the PostgreSQL server and a note of it
 * there), until keyward's version or the plan changes, or `--rebuild`. Benchmarks run on copies.
 *
 * Building holds every record in memory: it runs in a child process (buildInChild), which runs this file:
 *
 *   bun run bench/support/dataset.ts PLAN.json META.json
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, open, readdir, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import type { Storage } from '../../src/storage/storage'
import { PRIMARY_KEY, type Application, type Consumer, type Enrollment, type Installation, type Organization, type TableName } from '../../src/storage/records'
import { EmbeddedStorage } from '../../src/storage/embedded'
import { PostgresStorage } from '../../src/storage/postgres'
import { MIGRATIONS } from '../../src/storage/postgres/schema'
import { Store } from '../../src/store/store'
import { acquireDataDirLock } from '../../src/store/lock'
import { initStore, keywardCli, type Target } from './keyward'
import { ROOT } from '../../test/support/server-process'
import { createDatabase, databaseBytes, databaseHolds, databaseUrl, dropDatabase, onDatabase } from './postgres'

/** Enrollments a transaction creates, each with its consumer and installation: about 1,000 rows. */
const ENROLLMENTS_PER_TRANSACTION = 333
const TRANSACTIONS_IN_FLIGHT = 8
export const ENVIRONMENT = 'PRODUCTION'
/** Part of every cache key: raise it when the records a plan makes change. */
const DATASET_VERSION = 2
export const CACHE_DIR = join(ROOT, 'bench', '.cache')

/** One customer organization of the vendor and what it holds. */
export interface CustomerPlan {
  readonly description: string
  /** Applications, each with the one environment ENVIRONMENT. */
  readonly applications: number
  /** Enrollments, spread round-robin over the applications, each with its own installation. */
  readonly enrollments: number
  /** Consecutive enrollments sharing one consumer (1: every enrollment has its own consumer). */
  readonly enrollmentsPerConsumer: number
  /** After every this many consumers one more, without enrollments (0: never). */
  readonly spareConsumerEvery: number
}

export interface BuildPlan {
  /** Initialised already (`keyward init`): holds the vendor and nothing else. */
  readonly target: Target
  readonly vendorId: string
  /** Built in this order. */
  readonly customers: readonly CustomerPlan[]
  /** Then this many more customers of the vendor holding nothing (a vendor has many customers). */
  readonly emptyCustomers?: number
  /** Also write the same records here as a json-server database (each record with `id` = its key). */
  readonly jsonServerDb?: string
  /** For progress lines. */
  readonly label: string
}

export interface BuiltCustomer {
  readonly organizationId: string
  readonly applicationIds: string[]
  readonly enrollments: number
  /** The enrollment in the middle of the customer's enrollments (in creation order). */
  readonly middleEnrollmentId: string | null
}

export interface BuildMeta {
  readonly vendorId: string
  readonly customers: BuiltCustomer[]
  readonly counts: Record<TableName, number>
  /** Rows stored, all tables. */
  readonly records: number
  /** Inserting every record through the storage interface. */
  readonly loadSeconds: number
  /** Embedded: closing the store (it writes its snapshot). PostgreSQL: VACUUM ANALYZE. */
  readonly closeSeconds: number
  /** The data dir's files, or the database (pg_database_size). */
  readonly bytes: number
  readonly jsonServerDbBytes: number | null
}

/** Tables json-server gets, in this order. */
export const JSON_SERVER_COLLECTIONS = ['organizations', 'applications', 'consumers', 'installations', 'enrollments'] as const

/** The storage of `target`, opened as `serve` would (the embedded store under its data dir lock). */
export async function openStorage(target: Target): Promise<{ storage: Storage; close: () => Promise<void> }> {
  if (target.store === 'postgres') {
    const storage = PostgresStorage.connect(target.url, { maxConnections: TRANSACTIONS_IN_FLIGHT })
    return { storage, close: () => storage.close() }
  }
  const lock = acquireDataDirLock(target.dir)
  try {
    // No compaction while loading (every 64 MiB it would rewrite the whole snapshot): one at close.
    const storage = new EmbeddedStorage(await Store.open(target.dir, { compactAfterBytes: Number.MAX_SAFE_INTEGER }))
    return { storage, close: () => storage.close().finally(() => lock.release()) }
  } catch (error) {
    lock.release()
    throw error
  }
}

/** Fills `plan.target` in this process. */
export async function buildDataSet(plan: BuildPlan): Promise<BuildMeta> {
  const log = (line: string) => console.error(`  [build ${plan.label}] ${line}`)
  const started = performance.now()
  const { storage, close } = await openStorage(plan.target)
  const counts = { organizations: 1, applications: 0, consumers: 0, installations: 0, enrollments: 0, keysets: 0 } as Record<TableName, number>
  // Records as stored (with their times), for json-server; only kept when it is wanted.
  const kept = plan.jsonServerDb ? new Map<TableName, object[]>(JSON_SERVER_COLLECTIONS.map((t) => [t, []])) : null
  const vendor = await storage.find('organizations', plan.vendorId)
  if (!vendor) throw new Error(`the vendor ${plan.vendorId} is not in the store`)
  kept?.get('organizations')!.push(vendor)
  const insertAll = async (rows: [TableName, object][]) => {
    const stored = await storage.transaction((tx) => Promise.all(rows.map(([table, record]) => tx.insert(table, record as never))))
    for (const [i, [table]] of rows.entries()) {
      counts[table]++
      kept?.get(table)?.push(stored[i]!)
    }
  }
  const inFlight: Promise<void>[] = []
  const submit = async (rows: [TableName, object][]) => {
    inFlight.push(insertAll(rows))
    if (inFlight.length >= TRANSACTIONS_IN_FLIGHT) await inFlight.shift()
  }

  // As OrganizationService.create: a customer of the vendor, no virtual environments.
  const customer = (description: string): Omit<Organization, 'created' | 'modified'> => ({
    organization_id: crypto.randomUUID(),
    parent_id: plan.vendorId,
    organization_type: 'customer',
    description,
    state: 'active',
    environments: null,
  })
  // As ApplicationService.create: the customer's default environment, an api_key stored as a hash.
  const application = (owner: string, i: number): Omit<Application, 'created' | 'modified'> => ({
    application_id: crypto.randomUUID(),
    organization_id: owner,
    description: `Application ${i}`,
    environments: [ENVIRONMENT],
    state: 'active',
    api_key_hash: createHash('sha256').update(`kwk_${randomBytes(24).toString('base64url')}`).digest('hex'),
  })
  // As ConsumerService.createIn, InstallationService.createIn (not auto-verified) and EnrollmentService.create.
  const consumer = (owner: string): Omit<Consumer, 'created' | 'modified'> => ({ consumer_id: crypto.randomUUID(), organization_id: owner, state: 'active' })
  const installation = (owner: string, n: number): Omit<Installation, 'created' | 'modified'> => ({
    installation_id: crypto.randomUUID(),
    organization_id: owner,
    description: `Device ${n}`,
    state: 'unregistered',
  })
  const enrollment = (owner: string, consumerId: string, installationId: string, applicationId: string): Omit<Enrollment, 'created' | 'modified'> => ({
    enrollment_id: crypto.randomUUID(),
    organization_id: owner,
    consumer_id: consumerId,
    installation_id: installationId,
    application_id: applicationId,
    environment: ENVIRONMENT,
    active_keyset_id: null,
    client_enclave_key: null,
    state: 'active',
  })

  const built: BuiltCustomer[] = []
  for (const [o, spec] of plan.customers.entries()) {
    const owner = customer(spec.description)
    await insertAll([['organizations', owner]])
    const apps = Array.from({ length: spec.applications }, (_, a) => application(owner.organization_id, a))
    await insertAll(apps.map((app) => ['applications', app]))
    const middle = Math.floor(spec.enrollments / 2)
    let middleEnrollmentId: string | null = null
    let rows: [TableName, object][] = []
    let consumers = 0
    for (let n = 0; n < spec.enrollments; ) {
      const who = consumer(owner.organization_id)
      rows.push(['consumers', who])
      for (let k = 0; k < spec.enrollmentsPerConsumer && n < spec.enrollments; k++, n++) {
        const device = installation(owner.organization_id, n)
        const record = enrollment(owner.organization_id, who.consumer_id, device.installation_id, apps[n % apps.length]!.application_id)
        if (n === middle) middleEnrollmentId = record.enrollment_id
        rows.push(['installations', device], ['enrollments', record])
        if ((n + 1) % 100_000 === 0) log(`customer ${o + 1}: ${(n + 1).toLocaleString('en')} enrollments, ${((performance.now() - started) / 1000).toFixed(1)} s`)
      }
      if (spec.spareConsumerEvery > 0 && ++consumers % spec.spareConsumerEvery === 0) rows.push(['consumers', consumer(owner.organization_id)])
      if (rows.length >= 3 * ENROLLMENTS_PER_TRANSACTION) {
        await submit(rows)
        rows = []
      }
    }
    if (rows.length > 0) await submit(rows)
    await Promise.all(inFlight.splice(0))
    built.push({ organizationId: owner.organization_id, applicationIds: apps.map((a) => a.application_id), enrollments: spec.enrollments, middleEnrollmentId })
  }
  for (let n = 0; n < (plan.emptyCustomers ?? 0); n += 1000) {
    await submit(Array.from({ length: Math.min(1000, plan.emptyCustomers! - n) }, (_, i): [TableName, object] => ['organizations', customer(`Customer ${n + i + 2}`)]))
  }
  await Promise.all(inFlight.splice(0))
  const loaded = performance.now()
  const records = Object.values(counts).reduce((a, b) => a + b, 0)
  log(`loaded ${records.toLocaleString('en')} records in ${((loaded - started) / 1000).toFixed(1)} s; ${plan.target.store === 'embedded' ? 'writing the snapshot' : 'VACUUM ANALYZE'}`)
  await close()
  // A database that has run for a while has been vacuumed and analysed by autovacuum: so that the
  // first runs do not measure a planner without statistics or index scans without a visibility map.
  if (plan.target.store === 'postgres') await onDatabase(plan.target.url, (sql) => sql`VACUUM ANALYZE`)
  const closeSeconds = (performance.now() - loaded) / 1000

  let jsonServerDbBytes: number | null = null
  if (plan.jsonServerDb && kept) {
    jsonServerDbBytes = await writeJsonServerDb(plan.jsonServerDb, kept)
    log(`wrote the json-server db.json (${(jsonServerDbBytes / 2 ** 20).toFixed(0)} MiB)`)
  }
  const target = plan.target
  const bytes = target.store === 'embedded' ? await directoryBytes(target.dir) : await databaseBytes(target.url, new URL(target.url).pathname.slice(1))
  return { vendorId: plan.vendorId, customers: built, counts, records, loadSeconds: (loaded - started) / 1000, closeSeconds, bytes, jsonServerDbBytes }
}

async function directoryBytes(dir: string): Promise<number> {
  let bytes = 0
  for (const entry of await readdir(dir, { withFileTypes: true })) if (entry.isFile()) bytes += (await stat(join(dir, entry.name))).size
  return bytes
}

/**
 * `{"organizations":[...],"applications":[...],...}`, one record a line, each record with `id`
 * (json-server's key) first, equal to its own primary key. Streamed: the text of a million records
 * would not fit in one string comfortably.
 */
async function writeJsonServerDb(path: string, tables: Map<TableName, object[]>): Promise<number> {
  const handle = await open(path, 'w', 0o600)
  let parts: string[] = []
  let chars = 0
  let bytes = 0
  const flush = async () => {
    const buffer = Buffer.from(parts.join(''))
    parts = []
    chars = 0
    bytes += buffer.length
    let written = 0
    while (written < buffer.length) written += (await handle.write(buffer, written, buffer.length - written)).bytesWritten
  }
  const add = async (text: string) => {
    parts.push(text)
    chars += text.length
    if (chars >= 1 << 20) await flush()
  }
  try {
    await add('{')
    for (const [t, name] of JSON_SERVER_COLLECTIONS.entries()) {
      await add(`${t > 0 ? ',' : ''}\n${JSON.stringify(name)}:[`)
      for (const [i, record] of tables.get(name)!.entries()) {
        const id = (record as Record<string, string>)[PRIMARY_KEY[name]]
        await add(`${i > 0 ? ',' : ''}\n${JSON.stringify({ id, ...record })}`)
      }
      await add('\n]')
    }
    await add('\n}\n')
    await flush()
    // On disk before anyone measures anything: its writeback would otherwise land in some later run.
    await handle.sync()
  } finally {
    await handle.close()
  }
  return bytes
}

/**
 * Builds in a child process (`bun run` this file), inheriting stderr for its progress lines.
 * `spawn` registers the child with the caller's process registry, so it is stopped on Ctrl-C.
 */
export async function buildInChild(
  plan: BuildPlan,
  files: { planFile: string; metaFile: string },
  spawn: (cmd: string[], options: Parameters<typeof Bun.spawn>[1]) => Subprocess = Bun.spawn,
): Promise<BuildMeta> {
  await Bun.write(files.planFile, JSON.stringify(plan))
  const proc = spawn([process.execPath, 'run', import.meta.path, files.planFile, files.metaFile], { cwd: ROOT, stdin: 'ignore', stdout: 'inherit', stderr: 'inherit' })
  const code = await proc.exited
  if (code !== 0) throw new Error(`building ${plan.label} failed (exit ${code ?? proc.signalCode})`)
  return (await Bun.file(files.metaFile).json()) as BuildMeta
}

// ---------------------------------------------------------------------------------------------
// The cache

export interface DataSetSpec {
  readonly store: Target['store']
  /** Part of the cache's file and database names: lowercase letters, digits, underscores. */
  readonly name: string
  readonly customers: readonly CustomerPlan[]
  readonly emptyCustomers?: number
  readonly jsonServer: boolean
  /** PostgreSQL: the administrative URL of the server that holds the cached database. */
  readonly adminUrl?: string
}

export interface CachedDataSet {
  readonly meta: BuildMeta
  /** The data as built: never served, only copied (a data dir) or used as a template (a database). */
  readonly pristine: Target
  /** The cached database's name (PostgreSQL). */
  readonly database: string | null
  readonly jsonServerDb: string | null
  /** Built by this run (false: taken from the cache). */
  readonly built: boolean
}

/** The cached database of a spec, on its server. */
export const cachedDatabaseName = (spec: DataSetSpec) => `keyward_bench_${spec.name}`

/** The data set of `spec` from bench/.cache, built first when it is missing, stale, or `rebuild`. */
export async function cachedDataSet(
  spec: DataSetSpec,
  options: { rebuild: boolean; spawn: (cmd: string[], options: Parameters<typeof Bun.spawn>[1]) => Subprocess },
): Promise<CachedDataSet> {
  const dir = join(CACHE_DIR, `${spec.store}-${spec.name}`)
  const metaFile = join(dir, 'meta.json')
  const database = spec.store === 'postgres' ? cachedDatabaseName(spec) : null
  const pristine: Target =
    spec.store === 'embedded' ? { store: 'embedded', dir: join(dir, 'data') } : { store: 'postgres', url: databaseUrl(spec.adminUrl!, database!) }
  const jsonServerDb = spec.jsonServer ? join(dir, 'db.json') : null
  const server = spec.adminUrl ? new URL(spec.adminUrl).host : null
  const key = JSON.stringify({
    version: DATASET_VERSION,
    keyward: (await keywardCli(['--version'])).trim(),
    // The database's schema as written, not only its version: a migration not yet released may still change.
    schema: spec.store === 'postgres' ? createHash('sha256').update(JSON.stringify(MIGRATIONS)).digest('hex') : null,
    server,
    customers: spec.customers,
    emptyCustomers: spec.emptyCustomers ?? 0,
    jsonServer: spec.jsonServer,
  })

  const cached = (await Bun.file(metaFile).exists()) ? ((await Bun.file(metaFile).json()) as { key: string; meta: BuildMeta }) : null
  // The database by its name alone could be one another checkout's benchmark built again since: its vendor must be this one's.
  const present = database
    ? cached !== null && (await databaseHolds(spec.adminUrl!, database, cached.meta.vendorId))
    : (await readdir(join(dir, 'data')).catch(() => [])).length > 0
  if (!options.rebuild && cached?.key === key && present) return { meta: cached.meta, pristine, database, jsonServerDb, built: false }

  await rm(dir, { recursive: true, force: true })
  await mkdir(dir, { recursive: true, mode: 0o700 })
  if (database) {
    await dropDatabase(spec.adminUrl!, database)
    await createDatabase(spec.adminUrl!, database)
  }
  const { organization_id: vendorId } = await initStore(pristine)
  const plan: BuildPlan = {
    target: pristine,
    vendorId,
    customers: spec.customers,
    emptyCustomers: spec.emptyCustomers ?? 0,
    label: `${spec.store} ${spec.name}`,
    ...(jsonServerDb ? { jsonServerDb } : {}),
  }
  const meta = await buildInChild(plan, { planFile: join(dir, 'plan.json'), metaFile: join(dir, 'built.json') }, options.spawn)
  await Bun.write(metaFile, JSON.stringify({ key, meta }))
  return { meta, pristine, database, jsonServerDb, built: true }
}

if (import.meta.main) {
  const [planFile, metaFile] = process.argv.slice(2)
  try {
    if (!planFile || !metaFile) throw new Error('usage: bun run bench/support/dataset.ts PLAN.json META.json')
    const meta = await buildDataSet((await Bun.file(planFile).json()) as BuildPlan)
    await Bun.write(metaFile, JSON.stringify(meta))
  } catch (error) {
    console.error(`bench/support/dataset.ts: ${(error as Error)?.stack ?? error}`)
    process.exitCode = 1
  }
}
