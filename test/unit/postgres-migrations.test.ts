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

  /** A new database, a connection to it and an instance of the storage on it, for `work`; all closed and dropped after. */
  async function withNewDatabase<T>(work: (database: { url: string; sql: SQL; instance: PostgresStorage }) => Promise<T>): Promise<T> {
    const other = await createTestDatabase()
    const sql = new SQL({ url: other.url, max: 1 })
    const instance = PostgresStorage.connect(other.url)
    try {
      return await work({ url: other.url, sql, instance })
    } finally {
      await instance.close()
      await sql.close()
      await other.drop()
    }
  }

  /** A database left at `texts.length` by a build whose migrations' texts were `texts`. */
  async function databaseAt(sql: SQL, texts: readonly string[]): Promise<void> {
    for (const text of texts) await sql.unsafe(text)
    await sql`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())`
    for (let version = 1; version <= texts.length; version++) await sql`INSERT INTO schema_migrations (version, name) VALUES (${version}, ${MIGRATIONS[version - 1]!.name})`
  }

  const migrationTexts = MIGRATIONS.map((migration) => migration.sql)

  describe('migrations', () => {
    test('instances starting together apply each migration once', () =>
      withNewDatabase(async ({ url, sql, instance }) => {
        const others = [1, 2].map(() => PostgresStorage.connect(url))
        try {
          const order: number[] = []
          await Promise.all([instance, ...others].map((each, i) => each.underMigrationLock(async () => void order.push(i))))
          expect(order.sort()).toEqual([0, 1, 2])
          const rows = await sql`SELECT version FROM schema_migrations ORDER BY version`
          expect(rows.map((row: { version: number }) => row.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1))
        } finally {
          await Promise.all(others.map((other) => other.close()))
        }
      }))

    test('a schema newer than this program is refused, naming both versions', () =>
      withNewDatabase(async ({ sql, instance }) => {
        await instance.underMigrationLock(async () => {})
        await sql`INSERT INTO schema_migrations (version, name) VALUES (${SCHEMA_VERSION + 1}, 'from the future')`
        const refused = await instance.underMigrationLock(async () => 'ran').catch((error) => error)
        expect(refused).toBeInstanceOf(SchemaTooNewError)
        expect(refused.message).toContain(`version ${SCHEMA_VERSION + 1}`)
        expect(refused.message).toContain(`version ${SCHEMA_VERSION})`)
        expect(await instance.requireCurrentSchema().catch((error) => error)).toBeInstanceOf(SchemaTooNewError)
      }))

    test('a current schema is served by a role that may read and write its tables but not create any: nothing is created at start', () =>
      withNewDatabase(async ({ url, sql, instance: owner }) => {
        const role = `keyward_test_app_${crypto.randomUUID().replaceAll('-', '')}`
        let app: PostgresStorage | undefined
        try {
          await owner.underMigrationLock(async () => {})
          await sql.unsafe(`CREATE ROLE ${role} LOGIN`)
          await sql.unsafe(`GRANT USAGE ON SCHEMA public TO ${role}`)
          await sql.unsafe(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${role}`)
          const asRole = new URL(url)
          asRole.username = role
          app = PostgresStorage.connect(asRole.toString())
          expect(await app.underMigrationLock(async () => 'started')).toBe('started')
        } finally {
          await app?.close()
          // A role belongs to the server, not the database: dropped here, before the database goes.
          await sql.unsafe(`DROP OWNED BY ${role}`)
          await sql.unsafe(`DROP ROLE IF EXISTS ${role}`)
        }
      }))

    test("another program's schema_migrations (golang-migrate's) is not taken for keyward's: refused, nothing migrated", () =>
      withNewDatabase(async ({ sql, instance }) => {
        await sql`CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL)`
        await sql`INSERT INTO schema_migrations VALUES (3, false)`
        const refused = await instance.underMigrationLock(async () => 'ran').catch((error) => error)
        expect(refused.message).toContain("schema_migrations table that is not keyward's")
        expect((await sql`SELECT to_regclass('organizations') IS NULL AS untouched`)[0].untouched).toBe(true)
      }))

    test("a database holding keyward's tables without its record of migrations is refused with a message that says so, not migrated again", () =>
      withNewDatabase(async ({ sql, instance }) => {
        await instance.underMigrationLock(async () => {})
        await sql`DROP TABLE schema_migrations`
        const refused = [await instance.underMigrationLock(async () => 'ran').catch((error) => error), await instance.requireCurrentSchema().catch((error) => error)]
        for (const error of refused) expect(error.message).toContain('records no keyward migration (schema_migrations is missing or empty) but holds a table organizations')
      }))
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
      statistics: await sql`SELECT stxrelid::regclass::text AS relation, stxname, pg_get_statisticsobjdef_columns(oid) AS columns, stxkind::text AS kinds FROM pg_statistic_ext WHERE stxnamespace = 'public'::regnamespace ORDER BY 1, 2`,
    }
  }

  /** Migrated to this build's schema from what `prepare` left (nothing: a new database): its catalog. */
  const migratedCatalog = (prepare: (sql: SQL) => Promise<void>): Promise<unknown> =>
    withNewDatabase(async ({ sql, instance }) => {
      await prepare(sql)
      await instance.underMigrationLock(async () => {})
      expect(await instance.schemaVersion()).toBe(SCHEMA_VERSION)
      return await catalogOf(sql)
    })

  test('a database migrated from any earlier version has the schema of a new one, also from the first texts of migrations 4 and 5 (since edited)', async () => {
    const fresh = await migratedCatalog(async () => {})
    for (let version = 1; version < SCHEMA_VERSION; version++) {
      expect({ from: version, catalog: await migratedCatalog((sql) => databaseAt(sql, migrationTexts.slice(0, version))) }).toEqual({ from: version, catalog: fresh })
    }
    // As builds d88257c (migration 4) and c2081c5 (migration 5) applied them: test/fixtures/postgres.
    const first = (name: string) => readFileSync(join(import.meta.dir, '../fixtures/postgres', name), 'utf8')
    const firstTexts = [...migrationTexts.slice(0, 3), first('migration-4-d88257c.sql'), first('migration-5-c2081c5.sql'), migrationTexts[5]!]
    for (const version of [4, 5, 6]) {
      expect({ from: version, catalog: await migratedCatalog((sql) => databaseAt(sql, firstTexts.slice(0, version))) }).toEqual({ from: version, catalog: fresh })
    }
  })

  test('a database of schema version 4 is migrated: the enrollment counters start from the enrollments there', () =>
    withNewDatabase(async ({ sql, instance }) => {
      await databaseAt(sql, migrationTexts.slice(0, 4))
      const [application, owner] = [crypto.randomUUID(), crypto.randomUUID()]
      await sql`INSERT INTO enrollments (enrollment_id, organization_id, consumer_id, installation_id, application_id, environment, state, created, modified)
        SELECT gen_random_uuid(), ${owner}, gen_random_uuid(), gen_random_uuid(), ${application}, 'PRODUCTION', 'active', i, i FROM generate_series(1, 12) i`
      await instance.underMigrationLock(async () => {})
      expect(await instance.schemaVersion()).toBe(SCHEMA_VERSION)
      const page = await instance.list({ table: 'enrollments', scope: owner, where: [{ field: 'application_id', in: [application] }], page: { number: 2, size: 5 }, order: 'asc' })
      expect({ total: page.total, items: page.items.length }).toEqual({ total: 12, items: 5 })
    }))

  test('a database of schema version 1 (signed tokens) is migrated: signing_secret dropped, tokens and audit_events there', () =>
    withNewDatabase(async ({ sql, instance }) => {
      // As version 1 left it: its schema, its row, and a signing secret.
      await databaseAt(sql, migrationTexts.slice(0, 1))
      await sql`INSERT INTO signing_secret (secret) VALUES (${new Uint8Array(32)})`
      expect(await instance.schemaVersion()).toBe(1)
      await instance.underMigrationLock(async () => {})
      expect(await instance.schemaVersion()).toBe(SCHEMA_VERSION)
      const [tables] = await sql`SELECT to_regclass('signing_secret') AS secret, to_regclass('tokens') AS tokens, to_regclass('audit_events') AS events`
      expect(tables).toEqual({ secret: null, tokens: 'tokens', events: 'audit_events' })
    }))
})
