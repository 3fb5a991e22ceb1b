/**
 * Data sets for the benchmarks, built THROUGH THE STORE: Store.open, initialiseStorage (the vendor),
 * then store.commit with PUTS_PER_TRANSACTION puts per transaction, records shaped as the services
 * make them; closing the store writes the snapshot. So the server later starts from a data dir
 * exactly like one it wrote itself. Optionally the same records go to a json-server db.json too.
 *
 * Building a million records holds them all in memory: do it in a child process so the benchmark
 * itself stays small (buildInChild), which runs this file:
 *
 *   bun run bench/support/dataset.ts PLAN.json META.json
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdir, open, stat } from 'node:fs/promises'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import { Store } from '../../src/store/store'
import type { Application, Consumer, Enrollment, Installation, Organization, RecordOf, TableName } from '../../src/store/database'
import { nowMicros } from '../../src/store/clock'
import { SNAPSHOT_FILE } from '../../src/store/paths'
import { acquireDataDirLock } from '../../src/store/lock'
import { initialiseStorage } from '../../src/cli/init'
import { EmbeddedStorage } from '../../src/storage/embedded'
import { MAX_TOKEN_TTL_SECONDS } from '../../src/auth/tokens'
import { createToken } from '../../src/modules/tokens/service'

export const PUTS_PER_TRANSACTION = 1_000
const COMMITS_IN_FLIGHT = 8
export const ENVIRONMENT = 'PRODUCTION'

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
  readonly dir: string
  /** Built in this order. */
  readonly customers: readonly CustomerPlan[]
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
  /** An admin token of the customer (recorded in the data dir; valid 366 days). */
  readonly adminToken: string
}

export interface BuildMeta {
  readonly dir: string
  readonly vendorId: string
  /** The vendor admin token `init` printed. */
  readonly vendorToken: string
  readonly customers: BuiltCustomer[]
  readonly counts: Record<TableName, number>
  /** Rows stored, all tables. */
  readonly records: number
  readonly loadSeconds: number
  readonly snapshotSeconds: number
  readonly snapshotBytes: number
  readonly jsonServerDbSeconds: number | null
  readonly jsonServerDbBytes: number | null
}

/** Tables json-server gets, in this order. */
export const JSON_SERVER_COLLECTIONS = ['organizations', 'applications', 'consumers', 'installations', 'enrollments'] as const

/** Builds `plan.dir` (which must not hold a data dir yet) in this process. */
export async function buildDataDir(plan: BuildPlan): Promise<BuildMeta> {
  const log = (line: string) => console.error(`  [build ${plan.label}] ${line}`)
  const dir = plan.dir
  await mkdir(dir, { recursive: true, mode: 0o700 })
  const lock = acquireDataDirLock(dir)
  const started = performance.now()
  // No compaction while loading (every 64 MiB it would rewrite the whole snapshot): one at close.
  const store = await Store.open(dir, { compactAfterBytes: Number.MAX_SAFE_INTEGER, log })
  const storage = new EmbeddedStorage(store)
  const { organization_id: vendorId, token: vendorToken } = await initialiseStorage(storage, 'Vendor', 'init')

  let batch: [TableName, unknown][] = []
  const inFlight: Promise<unknown>[] = []
  const flush = async () => {
    if (batch.length === 0) return
    const puts = batch
    batch = []
    inFlight.push(
      store.commit((tx) => {
        for (const [table, record] of puts) tx.put(table, record as never)
      }),
    )
    if (inFlight.length >= COMMITS_IN_FLIGHT) await inFlight.shift()
  }
  const put = async <N extends TableName>(table: N, record: RecordOf<N>) => {
    batch.push([table, record])
    if (batch.length >= PUTS_PER_TRANSACTION) await flush()
  }

  // As OrganizationService.create: a customer of the vendor, no virtual environments.
  const customer = (description: string): Organization => {
    const now = nowMicros()
    return {
      organization_id: crypto.randomUUID(),
      parent_id: vendorId,
      organization_type: 'customer',
      description,
      state: 'active',
      environments: null,
      created: now,
      modified: now,
    }
  }
  // As ApplicationService.create: the customer's default environment, an api_key stored as a hash.
  const application = (owner: Organization, i: number): Application => {
    const now = nowMicros()
    return {
      application_id: crypto.randomUUID(),
      organization_id: owner.organization_id,
      description: `Application ${i}`,
      environments: [ENVIRONMENT],
      state: 'active',
      api_key_hash: createHash('sha256').update(`kwk_${randomBytes(24).toString('base64url')}`).digest('hex'),
      created: now,
      modified: now,
    }
  }
  // As ConsumerService.createIn, InstallationService.createIn (not auto-verified) and EnrollmentService.create.
  const consumer = (owner: Organization): Consumer => {
    const now = nowMicros()
    return { consumer_id: crypto.randomUUID(), organization_id: owner.organization_id, state: 'active', created: now, modified: now }
  }
  const installation = (owner: Organization, n: number): Installation => {
    const now = nowMicros()
    return {
      installation_id: crypto.randomUUID(),
      organization_id: owner.organization_id,
      description: `Device ${n}`,
      state: 'unregistered',
      created: now,
      modified: now,
    }
  }
  const enrollment = (owner: Organization, c: Consumer, i: Installation, app: Application): Enrollment => {
    const now = nowMicros()
    return {
      enrollment_id: crypto.randomUUID(),
      organization_id: owner.organization_id,
      consumer_id: c.consumer_id,
      installation_id: i.installation_id,
      application_id: app.application_id,
      environment: ENVIRONMENT,
      active_keyset_id: null,
      client_enclave_key: null,
      state: 'active',
      created: now,
      modified: now,
    }
  }

  const built: Omit<BuiltCustomer, 'adminToken'>[] = []
  const owners: Organization[] = []
  for (const [o, spec] of plan.customers.entries()) {
    const owner = customer(spec.description)
    owners.push(owner)
    await put('organizations', owner)
    const apps: Application[] = []
    for (let a = 0; a < spec.applications; a++) {
      const app = application(owner, a)
      apps.push(app)
      await put('applications', app)
    }
    const middle = Math.floor(spec.enrollments / 2)
    let middleEnrollmentId: string | null = null
    let n = 0
    let consumers = 0
    while (n < spec.enrollments) {
      const who = consumer(owner)
      await put('consumers', who)
      for (let k = 0; k < spec.enrollmentsPerConsumer && n < spec.enrollments; k++, n++) {
        const device = installation(owner, n)
        await put('installations', device)
        const record = enrollment(owner, who, device, apps[n % apps.length]!)
        if (n === middle) middleEnrollmentId = record.enrollment_id
        await put('enrollments', record)
        if ((n + 1) % 100_000 === 0) log(`customer ${o + 1}: ${(n + 1).toLocaleString('en')} enrollments, ${((performance.now() - started) / 1000).toFixed(1)} s`)
      }
      if (spec.spareConsumerEvery > 0 && ++consumers % spec.spareConsumerEvery === 0) await put('consumers', consumer(owner))
    }
    built.push({ organizationId: owner.organization_id, applicationIds: apps.map((a) => a.application_id), enrollments: n, middleEnrollmentId })
  }
  await flush()
  await Promise.all(inFlight)
  const customers: BuiltCustomer[] = []
  for (const [i, owner] of owners.entries()) {
    const grant = { organization: owner, role: 'admin' as const, ttlSeconds: MAX_TOKEN_TTL_SECONDS, description: 'benchmark' }
    const { token } = await storage.transaction((tx) => createToken(tx, grant, { cli: 'issue-token' }))
    customers.push({ ...built[i]!, adminToken: token })
  }
  const loaded = performance.now()
  const counts = Object.fromEntries(Object.entries(store.tables).map(([name, table]) => [name, table.size])) as Record<TableName, number>
  const records = Object.values(counts).reduce((a, b) => a + b, 0)
  log(`loaded ${records.toLocaleString('en')} records in ${((loaded - started) / 1000).toFixed(1)} s; writing the snapshot`)
  await store.close()
  lock.release()
  const closed = performance.now()
  const snapshotBytes = (await stat(join(dir, SNAPSHOT_FILE))).size

  let jsonServerDbSeconds: number | null = null
  let jsonServerDbBytes: number | null = null
  if (plan.jsonServerDb) {
    // The store's tables stay readable after close.
    jsonServerDbBytes = await writeJsonServerDb(plan.jsonServerDb, store)
    jsonServerDbSeconds = (performance.now() - closed) / 1000
  }
  log(
    `snapshot ${(snapshotBytes / 2 ** 20).toFixed(0)} MiB in ${((closed - loaded) / 1000).toFixed(1)} s` +
      (jsonServerDbBytes !== null ? `; json-server db ${(jsonServerDbBytes / 2 ** 20).toFixed(0)} MiB in ${jsonServerDbSeconds!.toFixed(1)} s` : ''),
  )
  return {
    dir,
    vendorId,
    vendorToken,
    customers,
    counts,
    records,
    loadSeconds: (loaded - started) / 1000,
    snapshotSeconds: (closed - loaded) / 1000,
    snapshotBytes,
    jsonServerDbSeconds,
    jsonServerDbBytes,
  }
}

/**
 * `{"organizations":[...],"applications":[...],...}`, one record a line, each record with `id`
 * (json-server's key) first, equal to its own primary key. Streamed: the text of a million records
 * would not fit in one string comfortably.
 */
async function writeJsonServerDb(path: string, store: Store): Promise<number> {
  const handle = await open(path, 'w', 0o600)
  let parts: string[] = []
  let chars = 0
  let bytes = 0
  const add = async (text: string) => {
    parts.push(text)
    chars += text.length
    if (chars >= 1 << 20) await flush()
  }
  const flush = async () => {
    const buffer = Buffer.from(parts.join(''))
    parts = []
    chars = 0
    bytes += buffer.length
    let written = 0
    while (written < buffer.length) written += (await handle.write(buffer, written, buffer.length - written)).bytesWritten
  }
  try {
    await add('{')
    for (const [t, name] of JSON_SERVER_COLLECTIONS.entries()) {
      const table = store.tables[name]
      await add(`${t > 0 ? ',' : ''}\n${JSON.stringify(name)}:[`)
      let first = true
      for (const id of table.ids()) {
        await add(`${first ? '' : ','}\n${JSON.stringify({ id, ...table.get(id)! })}`)
        first = false
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
  files: { planFile: string; metaFile: string; cwd: string },
  spawn: (cmd: string[], options: Parameters<typeof Bun.spawn>[1]) => Subprocess = Bun.spawn,
): Promise<BuildMeta> {
  await Bun.write(files.planFile, JSON.stringify(plan))
  const proc = spawn([process.execPath, 'run', import.meta.path, files.planFile, files.metaFile], {
    cwd: files.cwd,
    stdin: 'ignore',
    stdout: 'inherit',
    stderr: 'inherit',
  })
  const code = await proc.exited
  if (code !== 0) throw new Error(`building ${plan.label} in ${plan.dir} failed (exit ${code ?? proc.signalCode})`)
  return (await Bun.file(files.metaFile).json()) as BuildMeta
}

if (import.meta.main) {
  const [planFile, metaFile] = process.argv.slice(2)
  try {
    if (!planFile || !metaFile) throw new Error('usage: bun run bench/support/dataset.ts PLAN.json META.json')
    const meta = await buildDataDir((await Bun.file(planFile).json()) as BuildPlan)
    await Bun.write(metaFile, JSON.stringify(meta))
  } catch (error) {
    console.error(`bench/support/dataset.ts: ${(error as Error)?.stack ?? error}`)
    process.exitCode = 1
  }
}
