/**
 * The PostgreSQL storage's migrations (docs/storage.md, "PostgreSQL"): applied once under the lock by
 * instances starting together, a schema newer than the build refused, old schemas migrated.
 * Skipped where no database server answers (README, "Database mode"); the set-up is test/support/postgres-storage.ts `createTestStorage`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SQL } from 'bun'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { PostgresStorage } from '../../src/storage/postgres'
import { MIGRATIONS, SCHEMA_VERSION, SchemaTooNewError } from '../../src/storage/postgres/schema'
import { databaseTestsCanRun, createTestDatabase } from '../support/database'
import { createTestStorage } from '../support/postgres-storage'

const reachable = await databaseTestsCanRun()

describe.skipIf(!reachable)('PostgreSQL storage', () => {
  let close = async () => {}
  beforeAll(async () => ({ close } = await createTestStorage()))
  afterAll(() => close())

  describe('migrations', () => {
    test('instances starting together apply each migration once', async () => {
      const other = await createTestDatabase()
      const instances = [1, 2, 3].map(() => PostgresStorage.connect(other.url))
      try {
        const order: number[] = []
        await Promise.all(instances.map((instance, i) => instance.underMigrationLock(async () => void order.push(i))))
        expect(order.sort()).toEqual([0, 1, 2])
        const sql = new SQL({ url: other.url, max: 1 })
        const rows = await sql`SELECT version FROM schema_migrations ORDER BY version`
        await sql.close()
        expect(rows.map((row: { version: number }) => row.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1))
      } finally {
        await Promise.all(instances.map((instance) => instance.close()))
        await other.drop()
      }
    })

    test('a schema newer than this program is refused, naming both versions', async () => {
      const other = await createTestDatabase()
      const instance = PostgresStorage.connect(other.url)
      try {
        await instance.underMigrationLock(async () => {})
        const sql = new SQL({ url: other.url, max: 1 })
        await sql`INSERT INTO schema_migrations (version, name) VALUES (${SCHEMA_VERSION + 1}, 'from the future')`
        await sql.close()
        const refused = await instance.underMigrationLock(async () => 'ran').catch((error) => error)
        expect(refused).toBeInstanceOf(SchemaTooNewError)
        expect(refused.message).toContain(`version ${SCHEMA_VERSION + 1}`)
        expect(refused.message).toContain(`version ${SCHEMA_VERSION})`)
        expect(await instance.requireCurrentSchema().catch((error) => error)).toBeInstanceOf(SchemaTooNewError)
      } finally {
        await instance.close()
        await other.drop()
      }
    })

    test('a current schema is served by a role that may read and write its tables but not create any: nothing is created at start', async () => {
      const other = await createTestDatabase()
      const role = `keyward_test_app_${crypto.randomUUID().replaceAll('-', '')}`
      const owner = PostgresStorage.connect(other.url)
      const sql = new SQL({ url: other.url, max: 1 })
      let app: PostgresStorage | undefined
      try {
        await owner.underMigrationLock(async () => {})
        await sql.unsafe(`CREATE ROLE ${role} LOGIN`)
        await sql.unsafe(`GRANT USAGE ON SCHEMA public TO ${role}`)
        await sql.unsafe(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`)
        const url = new URL(other.url)
        url.username = role
        app = PostgresStorage.connect(url.toString())
        expect(await app.underMigrationLock(async () => 'started')).toBe('started')
      } finally {
        await app?.close()
        await owner.close()
        await sql.unsafe(`DROP OWNED BY ${role}`)
        await sql.close()
        await other.drop()
        const admin = new SQL({ url: other.url.replace(/\/[^/?]*(\?|$)/, '/postgres$1'), max: 1 })
        await admin.unsafe(`DROP ROLE IF EXISTS ${role}`)
        await admin.close()
      }
    })

    test("another program's schema_migrations (golang-migrate's) is not taken for keyward's: refused, nothing migrated", async () => {
      const other = await createTestDatabase()
      const instance = PostgresStorage.connect(other.url)
      const sql = new SQL({ url: other.url, max: 1 })
      try {
        await sql`CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL)`
        await sql`INSERT INTO schema_migrations VALUES (3, false)`
        const refused = await instance.underMigrationLock(async () => 'ran').catch((error) => error)
        expect(refused.message).toContain("schema_migrations table that is not keyward's")
        expect((await sql`SELECT to_regclass('organizations') IS NULL AS untouched`)[0].untouched).toBe(true)
      } finally {
        await sql.close()
        await instance.close()
        await other.drop()
      }
    })

    test("a database holding keyward's tables without its record of migrations is refused with a message that says so, not migrated again", async () => {
      const other = await createTestDatabase()
      const instance = PostgresStorage.connect(other.url)
      try {
        await instance.underMigrationLock(async () => {})
        const sql = new SQL({ url: other.url, max: 1 })
        await sql`DROP TABLE schema_migrations`
        await sql.close()
        const refused = [await instance.underMigrationLock(async () => 'ran').catch((error) => error), await instance.requireCurrentSchema().catch((error) => error)]
        for (const error of refused) expect(error.message).toContain('records no keyward migration (schema_migrations is missing or empty) but holds a table organizations')
      } finally {
        await instance.close()
        await other.drop()
      }
    })
  })

  /**
   * The database's schema as the catalog holds it: every column, constraint, index, trigger and
   * function of the public schema (not the names the migrations were applied under).
   */
  async function catalogOf(sql: SQL): Promise<unknown> {
    return {
      columns: await sql`SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2`,
      constraints: await sql`SELECT conrelid::regclass::text AS relation, conname, pg_get_constraintdef(oid) AS definition FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2`,
      indexes: await sql`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1, 2`,
      triggers: await sql`SELECT tgrelid::regclass::text AS relation, tgname, pg_get_triggerdef(oid) AS definition FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1, 2`,
      functions: await sql`SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS arguments, l.lanname AS language, p.prosrc FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1, 2`,
    }
  }

  /** A database left at `version` by a build, whose migrations' texts were `texts` (the first `version`). */
  async function databaseAt(sql: SQL, texts: readonly string[]): Promise<void> {
    for (const text of texts) await sql.unsafe(text)
    await sql`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`
    for (let version = 1; version <= texts.length; version++) await sql`INSERT INTO schema_migrations (version, name) VALUES (${version}, ${MIGRATIONS[version - 1]!.name})`
  }

  /** Migrated to this build's schema from what `prepare` left (nothing: a new database): its catalog. */
  async function migratedCatalog(prepare: (sql: SQL) => Promise<void>): Promise<unknown> {
    const other = await createTestDatabase()
    const sql = new SQL({ url: other.url, max: 1 })
    const instance = PostgresStorage.connect(other.url)
    try {
      await prepare(sql)
      await instance.underMigrationLock(async () => {})
      expect(await instance.schemaVersion()).toBe(SCHEMA_VERSION)
      return await catalogOf(sql)
    } finally {
      await instance.close()
      await sql.close()
      await other.drop()
    }
  }

  test('a database migrated from any earlier version has the schema of a new one, also from the first texts of migrations 4 and 5 (since edited)', async () => {
    const fresh = await migratedCatalog(async () => {})
    const texts = MIGRATIONS.map((migration) => migration.sql)
    for (let version = 1; version < SCHEMA_VERSION; version++) {
      expect({ from: version, catalog: await migratedCatalog((sql) => databaseAt(sql, texts.slice(0, version))) }).toEqual({ from: version, catalog: fresh })
    }
    // As builds d88257c (migration 4) and c2081c5 (migration 5) applied them: test/fixtures/postgres.
    const first = (name: string) => readFileSync(join(import.meta.dir, '../fixtures/postgres', name), 'utf8')
    const firstTexts = [...texts.slice(0, 3), first('migration-4-d88257c.sql'), first('migration-5-c2081c5.sql'), texts[5]!]
    for (const version of [4, 5, 6]) {
      expect({ from: version, catalog: await migratedCatalog((sql) => databaseAt(sql, firstTexts.slice(0, version))) }).toEqual({ from: version, catalog: fresh })
    }
  })

  test('a database of schema version 4 is migrated: the enrollment counters start from the enrollments there', async () => {
    const other = await createTestDatabase()
    const sql = new SQL({ url: other.url, max: 1 })
    const instance = PostgresStorage.connect(other.url)
    try {
      for (const migration of MIGRATIONS.slice(0, 4)) await sql.unsafe(migration.sql)
      await sql`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`
      for (let version = 1; version <= 4; version++) await sql`INSERT INTO schema_migrations (version, name) VALUES (${version}, ${MIGRATIONS[version - 1]!.name})`
      const [application, owner] = [crypto.randomUUID(), crypto.randomUUID()]
      await sql`INSERT INTO enrollments (enrollment_id, organization_id, consumer_id, installation_id, application_id, environment, state, created, modified)
        SELECT gen_random_uuid(), ${owner}, gen_random_uuid(), gen_random_uuid(), ${application}, 'PRODUCTION', 'active', i, i FROM generate_series(1, 12) i`
      await instance.underMigrationLock(async () => {})
      expect(await instance.schemaVersion()).toBe(SCHEMA_VERSION)
      const page = await instance.list({ table: 'enrollments', scope: owner, where: [{ field: 'application_id', in: [application] }], page: { number: 2, size: 5 }, order: 'asc' })
      expect({ total: page.total, items: page.items.length }).toEqual({ total: 12, items: 5 })
    } finally {
      await instance.close()
      await sql.close()
      await other.drop()
    }
  })

  test('a database of schema version 1 (signed tokens) is migrated: signing_secret dropped, tokens and audit_events there', async () => {
    const other = await createTestDatabase()
    const sql = new SQL({ url: other.url, max: 1 })
    const instance = PostgresStorage.connect(other.url)
    try {
      // As version 1 left it: its schema, its row, and a signing secret.
      await sql.unsafe(MIGRATIONS[0]!.sql)
      await sql`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`
      await sql`INSERT INTO schema_migrations (version, name) VALUES (1, ${MIGRATIONS[0]!.name})`
      await sql`INSERT INTO signing_secret (secret) VALUES (${new Uint8Array(32)})`
      expect(await instance.schemaVersion()).toBe(1)
      await instance.underMigrationLock(async () => {})
      expect(await instance.schemaVersion()).toBe(SCHEMA_VERSION)
      const [tables] = await sql`SELECT to_regclass('signing_secret') AS secret, to_regclass('tokens') AS tokens, to_regclass('audit_events') AS events`
      expect(tables).toEqual({ secret: null, tokens: 'tokens', events: 'audit_events' })
    } finally {
      await instance.close()
      await sql.close()
      await other.drop()
    }
  })

})
