/**
 * The PostgreSQL implementation of the storage interface (docs/storage.md, "PostgreSQL"), on Bun's
 * built-in client (`Bun.SQL`; why that one: docs/storage.md). Any number of keyward instances may
 * use one database: every rule that must hold across them is the database's (constraints, row
 * locks), never this process's memory.
 *
 * Transactions run at READ COMMITTED with row locks: `tx.find` locks what it reads (FOR SHARE, or
 * FOR UPDATE when the transaction will change it), so what a rule decided on cannot change before
 * the commit. A deadlock or serialization failure runs the whole body again; a lost connection
 * is `DatabaseUnavailableError` (503), after trying a closed connection again while nothing can
 * have been committed.
 */
import { SQL } from 'bun'
import { PRIMARY_KEY, TABLE_NAMES, type RecordOf, type TableName } from '../records'
import { UniqueViolation, type Changes, type Credential, type Condition, type FieldIn, type Fresh, type ListQuery, type Page, type ParentLink, type Readiness, type StateMark, type Storage, type Tx, type WithParent } from '../storage'
import { mapInTurns, NO_TENANT } from '../../ops/turns'
import { ConnectionTurns } from './connection-turns'
import { endBackends, ReplaceablePool } from './pools'
import { DatabaseUnavailableError, isClosedConnection, isConnectionLost, isRetryable, violatedConstraint } from './errors'
import { checkSchemaVersion, migrate, MIGRATION_LOCK_KEY, schemaVersion } from './schema'
import { CredentialCache } from './credentials'
import { actFor, answeredWithin, requestTenant, waitedFor, withRequestWait } from './request-wait'
import { appendEventsStatement, listedRecord, CREDENTIAL, CREDENTIAL_GENERATION, countStatement, EVENTS_PER_STATEMENT, existsStatement, findWithinStatement, findManyWithinStatement, findWithParentStatement, insertValues, isKey, listStatement, PARENT_COLUMN, STATEMENTS, toRecord, TRANSACTION_TIME, TRANSACTION_TIME_AS_NOW, updateStatement, type Statement } from './statements'

const PURGE_AUDIT_EVENTS =
  'DELETE FROM audit_events WHERE event_id IN ' +
  '(SELECT event_id FROM audit_events WHERE created < $1::bigint ORDER BY created, event_id LIMIT $2::bigint FOR UPDATE SKIP LOCKED)'

/**
 * GET /readyz's question: are keyward's tables there, and does the row every request needs (its
 * credential's generation) answer? A database that answers without them (dropped and created again
 * empty, or a restore part way) is not ready: `SELECT 1` said ready while every request was answered
 * 500, then reading one table said ready while another was missing (reviews, 2026-11-30). Tables
 * only: a restore that has them all but not yet their triggers or indexes is not told apart.
 */
const READINESS_PROBE =
  'SELECT (SELECT generation FROM credential_generation) AS generation, ' +
  'ARRAY(SELECT name FROM unnest($1::text[]) AS t(name) WHERE to_regclass(name) IS NULL) AS missing'
const KEYWARD_TABLES = [...TABLE_NAMES, 'enrollment_counts', 'schema_migrations']

/** The probe's verdict on its answer: an error naming the tables that are missing, if any. */
function missingTables(rows: { missing: string[] }[]): void {
  const missing = rows[0]?.missing ?? []
  if (missing.length > 0) throw new Error(`the database lacks keyward's tables ${missing.join(', ')} (dropped, or a restore under way)`)
}

/** How long GET /readyz waits for the database's answer, and how long an answer is kept. */
const PROBE_TIMEOUT_MS = 2000
const PROBE_KEPT_MS = 1000

/** How long a read or a transaction may wait for the database's answers by default (`PostgresOptions.answerTimeoutMs`). */
export const DEFAULT_ANSWER_TIMEOUT_MS = 10_000

/** Runs of one transaction body at most, when it keeps meeting deadlocks or serialization failures. */
const MAX_ATTEMPTS = 5

/**
 * What every connection sets at its start: no statement runs longer than a request waits for it,
 * and every transaction runs at READ COMMITTED (see `connect`). And the server ends by itself a
 * session left in a transaction longer than that (keyward closes such a connection at its deadline,
 * but one lost on the way never tells the server, which kept its row locks: found in review,
 * 2026-11-30), and asks the client's TCP stack whether it is still there after a minute of silence
 * (so that a connection lost on the way is ended within about 90 s, not the system's two hours).
 */
const sessionSettings = (answerTimeoutMs: number) => ({
  statement_timeout: answerTimeoutMs,
  default_transaction_isolation: 'read committed',
  idle_in_transaction_session_timeout: answerTimeoutMs,
  ...KEEPALIVE,
})

/** The server's TCP keepalives on a connection (the readiness probe's too): see `sessionSettings`. */
const KEEPALIVE = { tcp_keepalives_idle: 60, tcp_keepalives_interval: 10, tcp_keepalives_count: 3 }

/** Anything that runs a statement: the pool, or one transaction's connection. */
type Connection = Pick<SQL, 'unsafe'>

export interface PostgresOptions {
  /** Connections in the pool (default 16). */
  readonly maxConnections?: number
  /**
   * A read or a transaction that has had no complete answer after this long is
   * DatabaseUnavailableError (503), and a transaction's connection is closed (docs/storage.md, "A
   * database that does not answer"). Default DEFAULT_ANSWER_TIMEOUT_MS.
   */
  readonly answerTimeoutMs?: number
}

export class PostgresStorage implements Storage {
  readonly synchronous = false
  private writeObserver: ((seconds: number) => void) | undefined
  /** Told when the readiness probe's answer changes, with the probe's error when it failed. */
  private readinessObserver: ((reachable: boolean, reason: string | undefined) => void) | undefined
  /** The readiness probe's own connection, so that it never waits behind a busy pool. */
  private probeSql: SQL | undefined
  /** The probe's query while it runs: never more than one at a time, however often /readyz is asked. */
  private probe: { readonly answer: Promise<void>; readonly deadline: number; readonly sql: SQL; readonly name: string } | undefined
  /** The `application_name` of the probe's connection now; each new one is numbered (`connectionsNamed`). */
  private probeName = ''
  /** Probe and generation-read connections made so far: each is named with its number, so that one given up on can be ended alone. */
  private connectionsNamed = 1
  private lastProbe = { at: -Infinity, reachable: true }
  /** Reads of the credential generation, one at a time on a connection of their own (they serve many requests each). */
  private generationSql: SQL | undefined
  private generationName = ''
  private closed = false
  private readonly credentials = new CredentialCache(() => this.readGeneration())
  /** The database's time as last read, and when (`performance.now()`): see `now`. */
  private databaseTime = { micros: NaN, readAt: 0 }
  /** The latest time `now()` answered from the database's time. */
  private answeredTime = -Infinity

  private constructor(
    private readonly url: string,
    /** `keyward <8 hex digits>`: this instance's connections are named after it (`application_name`). */
    private readonly instance: string,
    /** The connections open to ask the database about others (pools.ts `askDatabase`): ended by `close`. */
    private readonly asking: Set<SQL>,
    /** The pool for reads by key and transactions, replaced when its connections are lost (pools.ts). */
    private readonly mainPool: ReplaceablePool,
    /** The lists' own connections, planned for each list's values (docs/storage.md, "Plans"); replaced likewise. */
    private readonly listPool: ReplaceablePool,
    /** Their turns, shared by tenants (src/storage/postgres/connection-turns.ts). */
    private readonly listTurns: ConnectionTurns,
    /** The turns at `sql`'s connections, for transactions (reads by key are pipelined: `run`). */
    private readonly turns: ConnectionTurns,
    /**
     * Tries of a statement whose connection the server had closed. The pool notices that the
     * server closed an idle connection (a restart, pg_terminate_backend) only when it next uses
     * it, so after a restart every pooled connection fails once: one more try than there are
     * connections reaches a new one. A refused or timed-out new connection ends the tries.
     */
    private readonly connectionTries: number,
    private readonly answerTimeoutMs: number,
  ) {}

  /** The pools as they are now (`ReplaceablePool.current`): read for each statement. */
  private get sql(): SQL {
    return this.mainPool.current
  }

  private get listSql(): SQL {
    return this.listPool.current
  }

  /**
   * A pool on `url`. The schema is not touched: `serve` and `init` then call `underMigrationLock`;
   * commands that only read call `requireCurrentSchema`.
   */
  static connect(url: string, options: PostgresOptions = {}): PostgresStorage {
    const max = options.maxConnections ?? 16
    const answerTimeoutMs = options.answerTimeoutMs ?? DEFAULT_ANSWER_TIMEOUT_MS
    // No statement runs longer than a request waits for it: the database cancels it then, instead
    // of going on with work nobody will read (docs/storage.md, "A database that does not answer").
    // And every transaction at READ COMMITTED, the isolation keyward's transactions are written for
    // (docs/storage.md, "Transactions"), whatever the database's default: under a stricter one,
    // concurrent changes of one row fail with serialization errors that retries do not end.
    const limits = sessionSettings(answerTimeoutMs)
    // A quarter of the connections for lists, planned for each list's own values; the others keep
    // PostgreSQL's default plan caching (docs/storage.md, "Plans"). Two at least for the others:
    // the start holds one for its migration lock while its work uses another.
    const lists = Math.max(1, Math.floor(max / 4))
    const others = Math.max(2, max - lists)
    // Each pool's connections named, as PostgreSQL shows them (pg_stat_activity): this instance, the
    // pool's use and its generation (pools.ts asks the database about them by that name).
    const instance = `keyward ${crypto.randomUUID().slice(0, 8)}`
    const asking = new Set<SQL>()
    const mainPool = new ReplaceablePool(url, `${instance} main`, (name) => new SQL({ url, max: others, connectionTimeout: 10, connection: { ...limits, application_name: name } }), answerTimeoutMs, asking)
    const listPool = new ReplaceablePool(
      url,
      `${instance} lists`,
      (name) => new SQL({ url, max: lists, connectionTimeout: 10, connection: { ...limits, plan_cache_mode: 'force_custom_plan', application_name: name } }),
      answerTimeoutMs,
      asking,
    )
    return new PostgresStorage(url, instance, asking, mainPool, listPool, new ConnectionTurns(lists), new ConnectionTurns(others), max + 1, answerTimeoutMs)
  }

  /**
   * Applies the migrations this database lacks and then runs `work` (the first-run
   * initialisation), all under one advisory lock: instances starting together take turns, so
   * each migration and the initialisation happen once.
   */
  async underMigrationLock<R>(work: () => Promise<R>): Promise<R> {
    // No answer timeout: a reservation that came after one would be held by nobody (the connect
    // itself is bounded by `connectionTimeout`), and the lock may wait for another instance's migrations.
    const connection = await this.tries(() => this.sql.reserve(), this.connectionTries)
    try {
      // Nor a statement timeout: a migration may build an index over millions of rows.
      await connection`SET statement_timeout = 0`
      await connection`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`
      try {
        await migrate(connection)
        await this.learningTime(() => connection.unsafe(TRANSACTION_TIME_AS_NOW))
        return await work()
      } finally {
        await connection`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`
        await connection`RESET statement_timeout`
      }
    } finally {
      connection.release()
    }
  }

  /** For commands that read without migrating: refuses a schema older or newer than this program's. */
  async requireCurrentSchema(): Promise<void> {
    if (await this.read(() => checkSchemaVersion(this.sql))) throw new Error('the database schema is out of date or missing: run `keyward serve` or `keyward init` on it first')
    // The commands that judge expiry (`tokens list`) judge it by the database's clock too.
    await this.learningTime(() => this.read(() => this.sql.unsafe(TRANSACTION_TIME_AS_NOW)))
  }

  /** The schema version in the database (0: keyward has never run on it), for `verify`. */
  schemaVersion(): Promise<number> {
    return this.read(() => schemaVersion(this.sql))
  }

  async find<N extends TableName>(table: N, id: string, within?: readonly FieldIn<N>[]): Promise<RecordOf<N> | undefined> {
    if (!isKey(id)) return undefined
    const rows = await this.run(within === undefined ? { text: STATEMENTS[table].find, params: [id] } : findWithinStatement(table, id, within))
    return rows.length > 0 ? toRecord(table, rows[0]) : undefined
  }

  /**
   * A remembered credential when a read of the credential generation begun after this call shows
   * that it is still current; otherwise read, with the generation, in one statement (docs/storage.md,
   * "Credentials").
   */
  async findCredential(tokenId: string): Promise<Credential | undefined> {
    if (!isKey(tokenId)) return undefined
    // The generation read it waits for serves many requests and has a deadline of its own; this
    // request stops waiting for it once its own wait is over (`waitedFor`).
    const remembered = await waitedFor(this.answerTimeoutMs, (ms) => answeredWithin(this.credentials.current(tokenId), ms))
    if (remembered) return remembered
    const [row] = await this.learningTime(() => this.run({ text: CREDENTIAL, params: [tokenId] }))
    if (!row) return undefined
    const credential = credentialOf(row)
    this.credentials.remember(tokenId, credential, generationOf(row))
    return credential
  }

  private readGeneration(): Promise<number> {
    if (!this.generationSql) {
      this.generationName = `${this.instance} generation ${this.connectionsNamed++}`
      this.generationSql = new SQL({ url: this.url, max: 1, connectionTimeout: 10, connection: { ...sessionSettings(this.answerTimeoutMs), application_name: this.generationName } })
    }
    const [sql, name] = [this.generationSql, this.generationName]
    // Its one connection closed by the server (a restart) fails once: a second try opens another.
    // Unanswered, it is closed and forgotten: the next read opens a new one instead of queueing behind it.
    const late = () => {
      if (this.generationSql !== sql) return
      this.generationSql = undefined
      this.giveUp(sql, name)
    }
    // Its own deadline, not the request's that started it: requests that arrive meanwhile wait for it too.
    return answeredWithin(this.learningTime(() => this.tries(() => sql.unsafe(CREDENTIAL_GENERATION), 2)), this.answerTimeoutMs, late).then((rows) => generationOf(rows[0]))
  }

  async findWithParent<N extends TableName, P extends TableName>(table: N, id: string, parent: ParentLink<N, P>, within?: readonly FieldIn<N>[]): Promise<WithParent<N, P> | undefined> {
    if (!isKey(id)) return undefined
    const [row] = await this.run(findWithParentStatement(table, id, parent.field, parent.table, within))
    if (!row) return undefined
    const { [PARENT_COLUMN]: parentRow, ...record } = row
    return { record: toRecord(table, record), parent: parentRow ? toRecord(parent.table, parentRow) : undefined }
  }

  async findMany<N extends TableName>(table: N, ids: readonly string[], within?: readonly FieldIn<N>[]): Promise<(RecordOf<N> | undefined)[]> {
    const keys = ids.filter(isKey)
    const rows = keys.length === 0 ? [] : await this.run(within === undefined ? { text: STATEMENTS[table].findMany, params: [keys] } : findManyWithinStatement(table, keys, within))
    const byId = new Map(rows.map((row) => [row[PRIMARY_KEY[table]] as string, toRecord(table, row)]))
    return ids.map((id) => byId.get(id))
  }

  async list<N extends TableName>(query: ListQuery<N>): Promise<Page<RecordOf<N>>> {
    const statement = listStatement(query)
    // One deadline for the wait for a list connection and the list's answer; the connection's slot is
    // held until its statement is done, even one answered 503 (src/storage/postgres/connection-turns.ts).
    const rows: Rows = await waitedFor(this.answerTimeoutMs, (ms) => {
      let sent: Promise<Rows> | undefined
      const answer = this.listTurns.run(query.slice?.tenant ?? requestTenant() ?? NO_TENANT, performance.now() + ms, () => {
        sent = this.tries(() => this.listSql.unsafe(statement.text, statement.params), this.connectionTries)
        return sent
      })
      // Sent and unanswered at the deadline: its connection may be lost (a wait for a turn is not).
      return answeredWithin(answer, ms, () => sent && this.listPool.unanswered(sent))
    })
    // A page past the end is one row of nulls, carrying the total only.
    const listed = query.page ? rows.filter((row) => row[PRIMARY_KEY[query.table]] !== null) : rows
    // Made into records in turns of the event loop, in the request's slice (a page of big audit events).
    const items = await mapInTurns(listed, ({ total: _, ...row }) => listedRecord(query.table, row), query.slice)
    return { items, total: query.page ? Number(rows[0]?.total ?? 0) : rows.length }
  }

  async exists<N extends TableName>(table: N, where: readonly Condition<N>[]): Promise<boolean> {
    return (await this.run(existsStatement(table, where)))[0].found as boolean
  }

  transaction<R>(body: (tx: Tx) => Promise<R>): Promise<R> {
    const run: TransactionRun = { abandoned: false, connection: undefined }
    // Past the deadline the connection is closed: the server rolls back whatever has not committed,
    // and a COMMIT already sent has an unknown outcome, as when a connection is lost (503).
    // Its attempts hold one turn at the connections (`turns`) between them.
    return waitedFor(this.answerTimeoutMs, (ms) =>
      answeredWithin(this.turns.run(requestTenant() ?? NO_TENANT, performance.now() + ms, () => this.attempts(body, run)), ms, () => {
        run.abandoned = true
        run.connection?.close().catch(() => {})
      }),
    )
  }

  private async attempts<R>(body: (tx: Tx) => Promise<R>, run: TransactionRun): Promise<R> {
    for (let attempt = 1, lost = 0; ; attempt++) {
      const state = { committing: false }
      try {
        return await this.attempt(body, state, run)
      } catch (error) {
        if (run.abandoned) throw error
        if (isRetryable(error)) {
          // Still failing after MAX_ATTEMPTS: the database is too busy for this change now (503), and nothing of it was made.
          if (attempt >= MAX_ATTEMPTS) throw new DatabaseUnavailableError(error)
          // A few random milliseconds first, so that the two sides of a deadlock do not meet again.
          await Bun.sleep(Math.random() * 5 * attempt)
          continue
        }
        if (!isConnectionLost(error)) throw error
        // Closed before the commit was sent: the server rolled it back, so again on another
        // connection (see `connectionTries`). Lost during the commit: the outcome is unknown, and
        // only the client may decide to try again.
        if (!state.committing && isClosedConnection(error) && ++lost < this.connectionTries) continue
        throw error instanceof DatabaseUnavailableError ? error : new DatabaseUnavailableError(error)
      }
    }
  }

  /**
   * One run of a transaction body on a connection of its own. `BEGIN` is sent without waiting for
   * its answer, so it travels with the body's first statement, and `COMMIT` right after the body's
   * last statement, preceded by the audit events it appended (`tx.appendEvent`), all in one
   * statement: a create that inserts and records its event is two round trips instead of four, an
   * enrollment with its new consumer and installation sends one insert of events instead of three
   * (docs/storage.md, "Round trips"). PostgreSQL
   * runs them in order and, once a statement has failed, commits nothing, so the outcome is known
   * from all the answers together.
   */
  private async attempt<R>(body: (tx: Tx) => Promise<R>, state: { committing: boolean }, run: TransactionRun): Promise<R> {
    const connection = await this.sql.reserve()
    // Reserved after the deadline (the pool was busy): nothing was sent, the connection goes back.
    if (run.abandoned) {
      connection.release()
      throw new DatabaseUnavailableError(new Error('every connection of the pool was busy until --database-timeout'), 'no database connection was free in time')
    }
    run.connection = connection
    try {
      const tx = new PostgresTx(connection)
      tx.track(connection.unsafe('BEGIN'))
      let value: R
      try {
        value = await body(tx)
      } catch (error) {
        await tx.settled().catch(() => {})
        // A connection that cannot roll back is closed rather than returned to the pool inside a
        // transaction (Bun would close it on release then too).
        await connection.unsafe('ROLLBACK').catch(() => connection.close().catch(() => {}))
        throw error
      }
      state.committing = true
      const commitStarted = performance.now()
      tx.sendEvents()
      tx.track(connection.unsafe('COMMIT'))
      // Any statement that failed, even one whose error the body caught, means nothing was committed.
      await tx.settled()
      this.writeObserver?.((performance.now() - commitStarted) / 1000)
      return value
    } finally {
      run.connection = undefined
      connection.release()
    }
  }

  /**
   * A statement outside a transaction (a read). Not in turns (`turns`): the pool pipelines a waiting
   * statement on a busy connection, and one statement per connection at a time cost a read by id
   * 30% more CPU (docs/storage.md, "Turns at the connections").
   */
  private run(statement: Statement): Promise<Rows> {
    return this.read(() => this.sql.unsafe(statement.text, statement.params))
  }

  /**
   * `query`, tried again while the server had closed its connection (see `connectionTries`), and
   * DatabaseUnavailableError once unanswered for the answer timeout, or for what the request has
   * left of it (`waitedFor`). A pool's statement cannot be taken back: its connection answers it
   * when the database does.
   */
  private read<T>(query: () => Promise<T>): Promise<T> {
    return waitedFor(this.answerTimeoutMs, (ms) => {
      const answer = this.tries(query, this.connectionTries)
      return answeredWithin(answer, ms, () => this.mainPool.unanswered(answer))
    })
  }

  private async tries<T>(query: () => Promise<T>, maxTries: number): Promise<T> {
    for (let tries = 1; ; tries++) {
      try {
        return await query()
      } catch (error) {
        if (!isConnectionLost(error)) throw error
        if (!isClosedConnection(error) || tries >= maxTries) throw new DatabaseUnavailableError(error)
      }
    }
  }

  /** Runs one request's handler so that all its waits for the database share one answer timeout (src/storage/postgres/request-wait.ts). */
  requestScope<T>(handle: () => T): T {
    return withRequestWait(handle)
  }

  /** Its request's transactions take their turns at the connections as `tenant`'s (connection-turns.ts); its lists go by their slice's tenant, the same one. */
  actFor(tenant: string): void {
    actFor(tenant)
  }

  /** Reads see committed rows only: nothing a request reads can be undone (`StateMark`). */
  mark(): StateMark {
    return 0
  }

  /**
   * The database's time, as last read (with every credential and credential generation, so just
   * before a request's token is judged), moved on by the monotonic time since: this machine's
   * system clock plays no part. Before the first read, this machine's clock. Never less than it
   * answered before (an expired token stays expired, docs/storage.md "Time"): a new read that
   * brings a time behind it (this machine's monotonic clock ran a little fast) holds it there
   * until the database's time catches up, so the error never grows beyond one read's interval.
   */
  now(): number {
    if (Number.isNaN(this.databaseTime.micros)) return Date.now() * 1000
    const now = Math.max(this.answeredTime, Math.floor(this.databaseTime.micros + (performance.now() - this.databaseTime.readAt) * 1000))
    this.answeredTime = now
    return now
  }

  /** The rows `query` answers, whose first row's `now` column (statements.ts CLOCK) teaches the database's time (`learnTime`). */
  private async learningTime<R extends readonly { now?: unknown }[]>(query: () => Promise<R>): Promise<R> {
    const sent = performance.now()
    const rows = await query()
    this.learnTime(rows[0], sent)
    return rows
  }

  /**
   * A row's `now` column, the database's clock when it made the answer to a statement sent at `sent`
   * (`performance.now()`): on its arrival the database's time is at least that, and at most that
   * plus the whole round trip. The time known so far, moved on by the monotonic clock, is kept when
   * it lies between (an answer that arrived late teaches nothing: taken as the time at arrival, it
   * set `now()` back by the delay, found in review 2026-11-30); outside, the nearer bound is taken,
   * so a monotonic clock running fast or slow is corrected on every read.
   */
  private learnTime(row: { now?: unknown } | undefined, sent: number): void {
    if (row?.now === undefined || row.now === null) return
    const arrived = performance.now()
    const earliest = Number(row.now)
    const latest = earliest + (arrived - sent) * 1000
    const known = this.databaseTime.micros + (arrived - this.databaseTime.readAt) * 1000
    this.databaseTime = { micros: Number.isNaN(known) ? earliest : Math.min(Math.max(known, earliest), latest), readAt: arrived }
  }

  settle<T>(value: T): T {
    return value
  }

  /**
   * The oldest events before `before`, up to `limit`, in one statement. Rows another instance's
   * retention is deleting at the same moment are skipped rather than waited for.
   */
  async purgeAuditEvents(before: number, limit: number): Promise<number> {
    const started = performance.now()
    const rows = await this.read(() => this.sql.unsafe(PURGE_AUDIT_EVENTS, [before, limit]))
    // A durable write like a change's commit, as the embedded store's drops are (docs/operations.md, metrics).
    if ((rows.count as number) > 0) this.writeObserver?.((performance.now() - started) / 1000)
    return rows.count as number
  }

  /**
   * `observer` is told when /readyz turns unready (with why: the probe's error) and ready again, so
   * that the log says why a load balancer took the instance out (docs/operations.md).
   */
  observeReadiness(observer: (reachable: boolean, reason: string | undefined) => void): void {
    this.readinessObserver = observer
  }

  readiness(): Readiness | Promise<Readiness> {
    const now = performance.now()
    const answer = (): Readiness => (this.lastProbe.reachable ? 'ready' : 'database_unavailable')
    if (now - this.lastProbe.at < PROBE_KEPT_MS) return answer()
    if (!this.probe) {
      const probeSql = (this.probeSql ??= this.newProbeConnection())
      const finish = (reachable: boolean, error?: unknown) => {
        // A probe given up on (`unanswered`) tells nothing more: a newer one may be under way.
        if (this.probe?.sql !== probeSql) return
        this.noteReachable(reachable, error === undefined ? undefined : ((error as Error)?.message ?? String(error)))
        this.lastProbe = { at: performance.now(), reachable }
        this.probe = undefined
      }
      this.probe = { answer: probeSql.unsafe(READINESS_PROBE, [KEYWARD_TABLES]).then(missingTables).then(() => finish(true), (error: unknown) => finish(false, error)), deadline: now + PROBE_TIMEOUT_MS, sql: probeSql, name: this.probeName }
    }
    // A query still running past its deadline (a database that accepts but does not answer, or a
    // connection lost on the way without either end knowing) is given up on, with its connection:
    // the next probe opens a new one (an instance held unready until restarted otherwise: review, 2026-11-30).
    const remaining = this.probe.deadline - now
    const unanswered = (): Readiness => {
      const probe = this.probe
      if (probe && performance.now() >= probe.deadline) {
        this.probe = undefined
        if (this.probeSql === probe.sql) this.probeSql = undefined
        this.giveUp(probe.sql, probe.name)
      }
      this.noteReachable(false, `no answer to the probe within ${PROBE_TIMEOUT_MS} ms`)
      return 'database_unavailable'
    }
    if (remaining <= 0) return unanswered()
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<Readiness>((resolve) => (timer = setTimeout(() => resolve(unanswered()), remaining)))
    return Promise.race([this.probe.answer.then(answer), timeout]).finally(() => clearTimeout(timer))
  }

  private newProbeConnection(): SQL {
    this.probeName = `${this.instance} probe ${this.connectionsNamed++}`
    return new SQL({ url: this.url, max: 1, connectionTimeout: PROBE_TIMEOUT_MS / 1000, idleTimeout: 60, connection: { application_name: this.probeName, ...KEEPALIVE } } as ConstructorParameters<typeof SQL>[0])
  }

  /** Closes a connection given up on, `name`, and ends the backend the server still keeps for it (pools.ts `endBackends`). */
  private giveUp(sql: SQL, name: string): void {
    sql.close({ timeout: 0 }).catch(() => {})
    if (this.closed) return
    void endBackends(this.url, `${this.instance} check`, this.asking, name, this.answerTimeoutMs)
  }

  /** The probe's verdict, told to the observer when it changes (a probe unanswered counts as unready). */
  private noteReachable(reachable: boolean, reason: string | undefined): void {
    if (reachable !== this.lastProbe.reachable) this.readinessObserver?.(reachable, reason)
    this.lastProbe = { ...this.lastProbe, reachable }
  }

  /** PostgreSQL's own estimate (its statistics), not a count: counting a big table takes a scan. */
  async recordCounts(): Promise<Record<TableName, number>> {
    const rows = await this.read(() => this.sql.unsafe('SELECT relname, n_live_tup FROM pg_stat_user_tables WHERE schemaname = current_schema()'))
    const estimates = new Map<string, number>(rows.map((row: { relname: string; n_live_tup: string | number }) => [row.relname, Number(row.n_live_tup)]))
    return Object.fromEntries(TABLE_NAMES.map((name) => [name, estimates.get(name) ?? 0])) as Record<TableName, number>
  }

  observeWrites(observer: (seconds: number) => void): void {
    this.writeObserver = observer
  }

  /**
   * Closes every connection, all at once, after at most a second for statements still running: a
   * stop has waited for its requests already (`--stop-timeout`), and the pools closed one after
   * another with their own waits made a stop 12 s longer than that when the database did not answer
   * (review, 2026-11-30).
   */
  async close(): Promise<void> {
    this.closed = true
    const asking = [...this.asking].map((asked) => asked.close({ timeout: 0 }))
    await Promise.all([...asking, this.probeSql?.close({ timeout: 1 }), this.generationSql?.close({ timeout: 1 }), this.listPool.close(1), this.mainPool.close(1)])
  }
}

/** A transaction's connection, for its deadline to close; `abandoned` once past it. */
interface TransactionRun {
  abandoned: boolean
  connection: { close(): Promise<void> } | undefined
}

/** A credential from the row of the CREDENTIAL statement. */
function credentialOf(row: Record<string, unknown>): Credential {
  return {
    token: toRecord('tokens', row.token as Record<string, unknown>),
    organization: row.organization ? toRecord('organizations', row.organization as Record<string, unknown>) : undefined,
    parent: row.parent ? toRecord('organizations', row.parent as Record<string, unknown>) : undefined,
  }
}

/** The credential generation a row carries; NaN when there is none (its row deleted by hand: see CredentialCache). */
const generationOf = (row: { generation?: unknown } | undefined) => (row?.generation === null || row?.generation === undefined ? NaN : Number(row.generation))

class PostgresTx implements Tx {
  /** Every statement sent, whose answers decide whether the commit happened. */
  private readonly unanswered: Promise<unknown>[] = []
  /** The values of the audit events appended and not sent yet. */
  private readonly events: unknown[][] = []
  /** The first statement of this transaction that failed: nothing can be committed after it. */
  private firstFailure: unknown

  constructor(private readonly connection: Connection) {}

  /** Sends `text`; a failure is remembered (the transaction is then aborted) and rethrown. */
  private run(text: string, params: unknown[]): Promise<Rows> {
    return this.track(this.connection.unsafe(text, params))
  }

  /** Remembers a statement's failure, and keeps its promise until `settled`. */
  track<T>(statement: Promise<T>): Promise<T> {
    const watched = statement.catch((error) => {
      this.firstFailure ??= error
      throw error
    })
    // Handled here too: a statement nobody waits for (BEGIN, an appended event) must not be an
    // unhandled rejection; `settled` reports it.
    watched.catch(() => {})
    this.unanswered.push(watched)
    return watched
  }

  /** Resolves once every statement sent has answered; rejects with the first failure. */
  async settled(): Promise<void> {
    await Promise.allSettled(this.unanswered)
    if (this.firstFailure !== undefined) throw this.firstFailure
  }

  async findCredential(tokenId: string): Promise<Credential | undefined> {
    if (!isKey(tokenId)) return undefined
    const [row] = await this.run(CREDENTIAL, [tokenId])
    return row ? credentialOf(row) : undefined
  }

  async find<N extends TableName>(table: N, id: string, lock: 'share' | 'update' | 'none' = 'share'): Promise<RecordOf<N> | undefined> {
    if (!isKey(id)) return undefined
    const statements = STATEMENTS[table]
    const text = lock === 'update' ? statements.findForUpdate : lock === 'none' ? statements.find : statements.findForShare
    const rows = await this.run(text, [id])
    return rows.length > 0 ? toRecord(table, rows[0]) : undefined
  }

  async exists<N extends TableName>(table: N, where: readonly Condition<N>[]): Promise<boolean> {
    const { text, params } = existsStatement(table, where)
    return (await this.run(text, params))[0].found as boolean
  }

  async count<N extends TableName>(table: N, where: readonly Condition<N>[], atMost: number): Promise<number> {
    const { text, params } = countStatement(table, where, atMost)
    return (await this.run(text, params))[0].n as number
  }

  async insert<N extends TableName>(table: N, record: Fresh<N>): Promise<RecordOf<N>> {
    try {
      const rows = await this.run(STATEMENTS[table].insert, insertValues(table, record))
      return toRecord(table, rows[0])
    } catch (error) {
      // The transaction is aborted now: the caller can only end it (every service does, with a 409).
      const constraint = violatedConstraint(error)
      if (constraint === undefined) throw error
      throw new UniqueViolation(table, constraint === 'enrollments_tuple' ? 'enrollment_tuple' : 'primary_key')
    }
  }

  /**
   * Kept until the body has returned, then sent with the COMMIT (`sendEvents`, PostgresStorage.attempt):
   * a change's events go in one statement, whose answer nobody waits for apart from the COMMIT's.
   */
  appendEvent(event: Fresh<'audit_events'>, time: number): void {
    this.events.push([...insertValues('audit_events', event), time])
  }

  /** The events appended, in as few statements as EVENTS_PER_STATEMENT allows; a failure fails the change. */
  sendEvents(): void {
    for (let from = 0; from < this.events.length; from += EVENTS_PER_STATEMENT) {
      const rows = this.events.slice(from, from + EVENTS_PER_STATEMENT)
      this.run(appendEventsStatement(rows.length), rows.flat()).catch(() => {})
    }
    this.events.length = 0
  }

  async insertIfAbsent<N extends TableName>(table: N, record: Fresh<N>): Promise<{ record: RecordOf<N>; inserted: boolean }> {
    const rows = await this.run(STATEMENTS[table].insertIfAbsent, insertValues(table, record))
    if (rows.length > 0) return { record: toRecord(table, rows[0]), inserted: true }
    // Taken: by this key (a concurrent insert was waited for, so it is committed and visible to
    // this next statement), or by another unique rule (the enrollment tuple) if no row has the key.
    const existing = await this.find(table, (record as Record<string, string>)[PRIMARY_KEY[table]]!)
    if (!existing) throw new UniqueViolation(table, 'enrollment_tuple')
    return { record: existing, inserted: false }
  }

  async update<N extends TableName>(table: N, id: string, changes: Changes<N>): Promise<RecordOf<N>> {
    const fields = Object.keys(changes)
    const rows = await this.run(updateStatement(table, fields), [id, ...fields.map((field) => (changes as Record<string, unknown>)[field])])
    if (rows.length === 0) throw new Error(`${table} ${id} does not exist`)
    return toRecord(table, rows[0])
  }

  /** `now()`: the time the transaction began, which every insert in it takes as `created`. */
  async time(): Promise<number> {
    return Number((await this.run(TRANSACTION_TIME, []))[0].time)
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Rows = any[]
