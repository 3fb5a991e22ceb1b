/**
 * The set-up of the PostgreSQL storage's own tests (test/unit/postgres-*.test.ts): the storage on a
 * new database of its own (test/support/database.ts), migrated, and the records they write.
 */
import { SQL } from 'bun'
import { PostgresStorage } from '../../src/storage/postgres'
import { listStatement } from '../../src/storage/postgres/statements'
import type { TableName } from '../../src/storage/records'
import type { Fresh, ListQuery } from '../../src/storage/storage'
import { createTestDatabase, type TestDatabase } from './database'

/** The PostgreSQL storage on a new database of its own, migrated (test/unit/postgres-*.test.ts). */
export interface TestStorage {
  readonly db: TestDatabase
  readonly storage: PostgresStorage
  /** The test's own connections, beside the storage's (locks, catalog reads, plans). */
  readonly admin: SQL
  /** Closes both and drops the database. */
  close(): Promise<void>
}

export async function createTestStorage(): Promise<TestStorage> {
  const db = await createTestDatabase()
  let storage: PostgresStorage | undefined
  let admin: SQL | undefined
  const close = async () => {
    await storage?.close()
    await admin?.close()
    await db.drop()
  }
  try {
    // Deadlocks are found after deadlock_timeout (1 s by default): sooner here, for the deadlock test.
    const setup = new SQL({ url: db.url, max: 1 })
    await setup.unsafe(`ALTER DATABASE ${new URL(db.url).pathname.slice(1)} SET deadlock_timeout = '100ms'`)
    await setup.close()
    storage = PostgresStorage.connect(db.url)
    await storage.underMigrationLock(async () => {})
    admin = new SQL({ url: db.url, max: 2 })
    return { db, storage, admin, close }
  } catch (error) {
    await close()
    throw error
  }
}

/** The customer the records below belong to unless given another. */
export const TEST_CUSTOMER = crypto.randomUUID()

export const freshConsumer = (id = crypto.randomUUID(), organization_id = TEST_CUSTOMER): Fresh<'consumers'> => ({ consumer_id: id, organization_id, state: 'active' })

export const freshEnrollment = (fields: Partial<Fresh<'enrollments'>> = {}): Fresh<'enrollments'> => ({
  enrollment_id: crypto.randomUUID(),
  organization_id: TEST_CUSTOMER,
  consumer_id: crypto.randomUUID(),
  installation_id: crypto.randomUUID(),
  application_id: crypto.randomUUID(),
  environment: 'PRODUCTION',
  active_keyset_id: null,
  client_enclave_key: null,
  state: 'active',
  ...fields,
})

export const freshEvent = (fields: Partial<Fresh<'audit_events'>> = {}): Fresh<'audit_events'> => ({
  event_id: Bun.randomUUIDv7(),
  action: 'consumer.create',
  target_type: 'consumer',
  target_id: crypto.randomUUID(),
  actor_organization_id: TEST_CUSTOMER,
  actor_token_id: crypto.randomUUID(),
  actor_role: 'admin',
  actor_cli: null,
  customer_id: TEST_CUSTOMER,
  changes: { state: [null, 'active'] },
  trace_id: crypto.randomUUID(),
  ...fields,
})

/** The plan of a list's statement (JSON text), the planner kept off whole-table reads: the tests' tables are small. */
export async function listPlan<N extends TableName>(sql: SQL, query: ListQuery<N>): Promise<string> {
  const { text, params } = listStatement(query)
  return sql.begin(async (tx) => {
    await tx`SET LOCAL enable_seqscan = off`
    await tx`SET LOCAL enable_bitmapscan = off`
    return JSON.stringify((await tx.unsafe(`EXPLAIN (FORMAT JSON) ${text}`, params))[0]['QUERY PLAN'])
  })
}

/**
 * `work` run as one request of `tenant`: its changes (and lists) take that tenant's turns at the
 * connections (src/storage/postgres/connection-turns.ts), where work outside a request is all one tenant's.
 */
export const asTenant = <T>(storage: PostgresStorage, tenant: string, work: () => Promise<T>): Promise<T> =>
  storage.requestScope(() => {
    storage.actFor(tenant)
    return work()
  })
