/**
 * The database schema, as numbered migrations (docs/storage.md, "Schema and migrations"). A
 * migration is never edited once released: a change to the schema is a new one at the end. Each
 * runs in its own transaction with its row in `schema_migrations`, under an advisory lock so that
 * instances starting together apply it once.
 */
import type { SQL } from 'bun'

export const MIGRATIONS: readonly { readonly name: string; readonly sql: string }[] = [
  {
    name: 'tables, uniqueness and list indexes',
    sql: `
      CREATE TABLE organizations (
        organization_id uuid PRIMARY KEY,
        parent_id uuid,
        organization_type text NOT NULL,
        description text NOT NULL,
        state text NOT NULL,
        environments jsonb,
        created bigint NOT NULL,
        modified bigint NOT NULL
      );
      CREATE INDEX organizations_created ON organizations (created, organization_id);
      CREATE INDEX organizations_parent ON organizations (parent_id, created, organization_id);

      CREATE TABLE applications (
        application_id uuid PRIMARY KEY,
        organization_id uuid NOT NULL,
        description text NOT NULL,
        environments text[] NOT NULL,
        state text NOT NULL,
        api_key_hash text NOT NULL,
        created bigint NOT NULL,
        modified bigint NOT NULL
      );
      CREATE INDEX applications_created ON applications (created, application_id);
      CREATE INDEX applications_organization ON applications (organization_id, created, application_id);

      CREATE TABLE consumers (
        consumer_id uuid PRIMARY KEY,
        organization_id uuid NOT NULL,
        state text NOT NULL,
        created bigint NOT NULL,
        modified bigint NOT NULL
      );
      CREATE INDEX consumers_created ON consumers (created, consumer_id);
      CREATE INDEX consumers_organization ON consumers (organization_id, created, consumer_id);

      CREATE TABLE installations (
        installation_id uuid PRIMARY KEY,
        organization_id uuid NOT NULL,
        description text NOT NULL,
        state text NOT NULL,
        created bigint NOT NULL,
        modified bigint NOT NULL
      );
      CREATE INDEX installations_created ON installations (created, installation_id);
      CREATE INDEX installations_organization ON installations (organization_id, created, installation_id);

      CREATE TABLE enrollments (
        enrollment_id uuid PRIMARY KEY,
        organization_id uuid NOT NULL,
        consumer_id uuid NOT NULL,
        installation_id uuid NOT NULL,
        application_id uuid NOT NULL,
        environment text NOT NULL,
        active_keyset_id uuid,
        client_enclave_key text,
        state text NOT NULL,
        created bigint NOT NULL,
        modified bigint NOT NULL,
        -- docs/api.md "Enrollments": one enrollment per (consumer, installation, application, environment).
        -- Installation first: it also answers "the enrollments of this installation".
        CONSTRAINT enrollments_tuple UNIQUE (installation_id, consumer_id, application_id, environment)
      );
      CREATE INDEX enrollments_created ON enrollments (created, enrollment_id);
      CREATE INDEX enrollments_organization ON enrollments (organization_id, created, enrollment_id);
      CREATE INDEX enrollments_consumer ON enrollments (consumer_id, application_id);
      CREATE INDEX enrollments_application ON enrollments (application_id, created, enrollment_id);

      CREATE TABLE keysets (
        keyset_id uuid PRIMARY KEY,
        enrollment_id uuid NOT NULL,
        application_id uuid NOT NULL,
        environment text NOT NULL,
        client_enclave_key text NOT NULL,
        state text NOT NULL,
        created bigint NOT NULL,
        modified bigint NOT NULL
      );
      CREATE INDEX keysets_enrollment ON keysets (enrollment_id, created, keyset_id);
      CREATE INDEX keysets_environment ON keysets (application_id, environment);

      -- The token-signing secret (one row), created by init: in database mode it lives with the data.
      CREATE TABLE signing_secret (
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        secret bytea NOT NULL
      );
    `,
  },
  {
    name: 'recorded tokens and the audit trail; no signing secret',
    sql: `
      -- Tokens are records now (README "Tokens"): the secret signed tokens that are no longer accepted.
      DROP TABLE signing_secret;

      -- docs/api.md "Tokens". token_hash is the SHA-256 of the token string, never the string.
      CREATE TABLE tokens (
        token_id uuid PRIMARY KEY,
        organization_id uuid NOT NULL,
        role text NOT NULL,
        description text,
        state text NOT NULL,
        expires bigint NOT NULL,
        token_hash text NOT NULL,
        created bigint NOT NULL,
        modified bigint NOT NULL
      );
      CREATE INDEX tokens_created ON tokens (created, token_id);
      CREATE INDEX tokens_organization ON tokens (organization_id, created, token_id);

      -- docs/api.md "Audit events", stored flat (docs/storage.md). Inserted, never updated; retention
      -- deletes the oldest. changes is json, not jsonb: its fields keep the order they were recorded in.
      CREATE TABLE audit_events (
        event_id uuid PRIMARY KEY,
        action text NOT NULL,
        target_type text NOT NULL,
        target_id uuid NOT NULL,
        actor_organization_id uuid,
        actor_token_id uuid,
        actor_role text,
        actor_cli text,
        customer_id uuid,
        changes json NOT NULL,
        trace_id text,
        created bigint NOT NULL,
        modified bigint NOT NULL
      );
      -- Time order (the vendor's unfiltered list, since/until, retention), and each filter in time order.
      CREATE INDEX audit_events_created ON audit_events (created, event_id);
      CREATE INDEX audit_events_target ON audit_events (target_id, created, event_id);
      CREATE INDEX audit_events_customer ON audit_events (customer_id, created, event_id);
      CREATE INDEX audit_events_actor_token ON audit_events (actor_token_id, created, event_id);
      -- A customer's filter on actor tokens, answered from its own events alone.
      CREATE INDEX audit_events_customer_actor_token ON audit_events (customer_id, actor_token_id, created, event_id);
      CREATE INDEX audit_events_action ON audit_events (action, created, event_id);
    `,
  },
  {
    name: 'credential generation: a counter that every change of a token or an organization advances',
    sql: `
      -- What lets an instance keep the credentials it has read (docs/storage.md, "Credentials"):
      -- a remembered credential is used only while a read begun after the request arrived still
      -- finds the generation it was read at. The triggers are deferred, so the counter is advanced
      -- at commit, in the same transaction as the change (both become visible together), and its
      -- row lock is the last lock a transaction takes (no deadlock with the rows it changed).
      CREATE TABLE credential_generation (
        id boolean PRIMARY KEY DEFAULT true CHECK (id),
        generation bigint NOT NULL
      );
      INSERT INTO credential_generation (generation) VALUES (0);
      CREATE FUNCTION advance_credential_generation() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE credential_generation SET generation = generation + 1;
        RETURN NULL;
      END
      $$;
      CREATE CONSTRAINT TRIGGER tokens_credential_generation AFTER UPDATE OR DELETE ON tokens
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION advance_credential_generation();
      CREATE CONSTRAINT TRIGGER organizations_credential_generation AFTER UPDATE OR DELETE ON organizations
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION advance_credential_generation();
      CREATE TRIGGER tokens_truncated_credential_generation AFTER TRUNCATE ON tokens
        FOR EACH STATEMENT EXECUTE FUNCTION advance_credential_generation();
      CREATE TRIGGER organizations_truncated_credential_generation AFTER TRUNCATE ON organizations
        FOR EACH STATEMENT EXECUTE FUNCTION advance_credential_generation();
    `,
  },
  {
    name: 'filters answered from indexes that hold the scope: enrollments by application, a customer\'s events by action and by target',
    sql: `
      -- A list's total counts every match. Filtered by application, the matches' owner (the scope
      -- every list has) was read from each row: 100,000 rows, 170 ms. With organization_id in the
      -- index the count is an index-only scan, 13 ms (docs/storage.md, "Lists").
      CREATE INDEX enrollments_application_scoped ON enrollments (application_id, created, enrollment_id) INCLUDE (organization_id);
      DROP INDEX enrollments_application;
      ALTER INDEX enrollments_application_scoped RENAME TO enrollments_application;
      -- A customer's filters on actions and on targets, answered from its own events alone: by the
      -- action or target index the planner may walk every tenant's events of that action or record
      -- (docs/security.md).
      CREATE INDEX audit_events_customer_action ON audit_events (customer_id, action, created, event_id);
      CREATE INDEX audit_events_customer_target ON audit_events (customer_id, target_id, created, event_id);
    `,
  },
  {
    name: 'enrollment counters: the total of a page of an application\'s enrollments without counting them',
    sql: `
      -- A list's total counts every match: 100,000 enrollments of one application took 9 ms of
      -- the database's time per page, however small the page. Filtered by application alone (the
      -- page an application's owner reads), the total is the sum of these counters instead,
      -- kept in the same transaction as the enrollments (docs/storage.md, "Lists"). Each
      -- application's count is spread over 16 rows, one per connection (its backend's pid modulo
      -- 16), so that concurrent enrollments in one application do not queue for one row's lock
      -- until each other's commit.
      CREATE TABLE enrollment_counts (
        application_id uuid NOT NULL,
        slot smallint NOT NULL,
        enrollments bigint NOT NULL,
        PRIMARY KEY (application_id, slot)
      );
      -- The upserts are written out here, in PL/pgSQL (whose plans are kept per connection): through
      -- an SQL-language function each one was planned again, and an enrollment's insert cost a
      -- third more (pgbench, 16 clients).
      CREATE FUNCTION count_enrollments() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
          INSERT INTO enrollment_counts VALUES (OLD.application_id, pg_backend_pid() % 16, -1)
          ON CONFLICT (application_id, slot) DO UPDATE SET enrollments = enrollment_counts.enrollments - 1;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
          INSERT INTO enrollment_counts VALUES (NEW.application_id, pg_backend_pid() % 16, 1)
          ON CONFLICT (application_id, slot) DO UPDATE SET enrollments = enrollment_counts.enrollments + 1;
        END IF;
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER enrollments_counted AFTER INSERT OR DELETE OR UPDATE OF application_id ON enrollments
        FOR EACH ROW EXECUTE FUNCTION count_enrollments();
      CREATE FUNCTION clear_enrollment_counts() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        TRUNCATE enrollment_counts;
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER enrollments_truncated AFTER TRUNCATE ON enrollments
        FOR EACH STATEMENT EXECUTE FUNCTION clear_enrollment_counts();
      INSERT INTO enrollment_counts SELECT application_id, 0, count(*) FROM enrollments GROUP BY application_id;
    `,
  },
  {
    name: 'credential generation: advanced by a random step, so that it never takes a value twice',
    sql: `
      -- A restore, or a standby promoted after it lost commits, sets the counter back; counting up
      -- by one from there would come to values an instance remembered credentials at before, which
      -- may have been revoked since. By a random step of up to a billion it comes to none of them
      -- (docs/storage.md, "Credentials"); a bigint lasts some 10^10 changes.
      CREATE OR REPLACE FUNCTION advance_credential_generation() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE credential_generation SET generation = generation + 1 + floor(random() * 1000000000)::bigint;
        RETURN NULL;
      END
      $$;
    `,
  },
  {
    name: 'the schema of migrations 4 and 5 as they are, for databases migrated by their first texts',
    sql: `
      -- Migrations 4 and 5 were edited after builds had applied them (docs/storage.md, "Schema and
      -- migrations"): a database migrated by the first text of 4 (d88257c) lacks a customer's
      -- action and target indexes, and one migrated by the first text of 5 (c2081c5) counts
      -- enrollments through an SQL-language function, planned again on every insert. Here every
      -- database gets the schema of the migrations as they read now (the same as a new database's).
      CREATE INDEX IF NOT EXISTS audit_events_customer_action ON audit_events (customer_id, action, created, event_id);
      CREATE INDEX IF NOT EXISTS audit_events_customer_target ON audit_events (customer_id, target_id, created, event_id);
      CREATE OR REPLACE FUNCTION count_enrollments() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') THEN
          INSERT INTO enrollment_counts VALUES (OLD.application_id, pg_backend_pid() % 16, -1)
          ON CONFLICT (application_id, slot) DO UPDATE SET enrollments = enrollment_counts.enrollments - 1;
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') THEN
          INSERT INTO enrollment_counts VALUES (NEW.application_id, pg_backend_pid() % 16, 1)
          ON CONFLICT (application_id, slot) DO UPDATE SET enrollments = enrollment_counts.enrollments + 1;
        END IF;
        RETURN NULL;
      END
      $$;
      DROP FUNCTION IF EXISTS count_enrollment(uuid, bigint);
    `,
  },
  {
    name: 'statistics of customers and actions together: a customer\'s action filter planned from its own events',
    sql: `
      -- The planner takes a customer and an action as independent: for a customer with many events
      -- of other actions it expected thousands of matches where there were five, and planned the
      -- page as a walk of every customer's events in time order (or the count as a walk of the
      -- action's events of every customer) instead of the (customer, action) index (docs/storage.md,
      -- "Lists"). The combinations' own frequencies correct that estimate.
      CREATE STATISTICS audit_events_customer_action_frequencies (mcv) ON customer_id, action FROM audit_events;
      ANALYZE audit_events;
    `,
  },
]

/** The schema version this program writes: the number of migrations it knows. */
export const SCHEMA_VERSION = MIGRATIONS.length

/** A key of our own for pg_advisory_lock (any bigint; "keyward" in ASCII). */
export const MIGRATION_LOCK_KEY = 0x6b657977617264n

export class SchemaTooNewError extends Error {
  constructor(readonly found: number) {
    super(
      `the database schema is version ${found}, newer than this keyward knows (version ${SCHEMA_VERSION}): ` +
        'run the keyward release that wrote it, or a later one',
    )
    this.name = 'SchemaTooNewError'
  }
}

/**
 * The version of the schema in the database: 0 when keyward has never run on it. A database with no
 * migration recorded but keyward's first table is refused: applying migration 1 again failed with
 * only "relation organizations already exists" (found in review, 2026-11-30: `schema_migrations`
 * dropped by hand).
 */
export async function schemaVersion(sql: SQL): Promise<number> {
  const [{ present, ours, organizations }] = await sql`SELECT to_regclass('schema_migrations') IS NOT NULL AS present,
    (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass('schema_migrations') AND attname IN ('version', 'name', 'applied') AND NOT attisdropped) = 3 AS ours,
    to_regclass('organizations') IS NOT NULL AS organizations`
  // The table name other tools use too (golang-migrate, Rails): theirs read as ours migrated a
  // stranger's database or called it newer than keyward (found in review, 2026-11-30).
  if (present && !ours) throw new Error("the database has a schema_migrations table that is not keyward's (another program's migrations): give keyward a database of its own")
  const [{ version }] = present ? await sql`SELECT coalesce(max(version), 0)::int AS version FROM schema_migrations` : [{ version: 0 }]
  if (version === 0 && organizations) {
    throw new Error(
      'the database records no keyward migration (schema_migrations is missing or empty) but holds a table organizations: ' +
        'its schema was changed outside keyward, or it is another program\'s; restore it from a backup, or use an empty database',
    )
  }
  return version as number
}

/** Refuses a schema newer than this program's; true when it is older (migrations to apply). */
export async function checkSchemaVersion(sql: SQL): Promise<boolean> {
  const found = await schemaVersion(sql)
  if (found > SCHEMA_VERSION) throw new SchemaTooNewError(found)
  return found < SCHEMA_VERSION
}

/**
 * Applies the migrations this database lacks, on `connection` (one reserved connection that holds
 * the advisory lock while the caller's start-up work runs).
 */
export async function migrate(connection: SQL): Promise<number> {
  // Read before any DDL: on a current schema nothing is created, so a role that may read and write
  // the tables but not create any (beside an owner that migrates: README "Database mode") can serve.
  const found = await schemaVersion(connection)
  if (found > SCHEMA_VERSION) throw new SchemaTooNewError(found)
  if (found === SCHEMA_VERSION) return SCHEMA_VERSION
  await connection`CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied timestamptz NOT NULL DEFAULT now()
  )`
  for (let version = found + 1; version <= SCHEMA_VERSION; version++) {
    const migration = MIGRATIONS[version - 1]!
    await connection.begin(async (tx) => {
      await tx.unsafe(migration.sql)
      await tx`INSERT INTO schema_migrations (version, name) VALUES (${version}, ${migration.name})`
    })
  }
  return SCHEMA_VERSION
}
