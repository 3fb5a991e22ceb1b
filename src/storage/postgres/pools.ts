/**
 * A pool of connections that is replaced when its connections are lost without either end knowing
 * (docs/storage.md, "A database that does not answer"): a proxy or a NAT that dropped them, a
 * network that drops their packets, while new connections would work. Such connections were given
 * every new read (the pool pipelines reads on busy connections) and held the lists' turns, so an
 * instance stayed at 503 until it was restarted (found in review, 2026-11-30).
 *
 * Lateness alone does not tell a lost connection from a slow database (a read pipelined behind
 * statements that wait for a lock may wait several timeouts): replacing the pool then made it grow
 * past its size, and failed the transactions in flight, every few seconds of a long lock (found in
 * review the same day). So the database is asked, on a connection of its own, whether it is at work
 * for this pool: each pool's connections carry an `application_name` of their own, and only when
 * none of them runs a statement (or is in a transaction that moved lately) while one of the pool's
 * statements goes unanswered is the pool taken for lost.
 */
import { SQL } from 'bun'
import { answeredWithin } from './request-wait'

/** How long past its deadline a statement may go unanswered before the database is asked about its pool. */
const ASK_AFTER_MS = 2000
/**
 * The database is asked twice, this long apart, and the statement must still be unanswered after
 * both: a lock released just before the first answer makes the pool's backends idle while its
 * answers are on their way (found in review, 2026-11-30: a pool replaced as a long lock ended).
 */
const ASK_AGAIN_AFTER_MS = 500

/**
 * The backends of a pool that are at work for it: running a statement or waiting for a lock, or in
 * a transaction that moved within the answer timeout (an older one is a transaction's connection
 * that keyward closed at its deadline, which the server never heard of).
 */
const WORKING =
  'SELECT count(*)::int AS working FROM pg_stat_activity WHERE application_name = $1 ' +
  "AND (state = 'active' OR (state LIKE 'idle in transaction%' AND state_change > clock_timestamp() - make_interval(secs => $2::float8 / 1000)))"

/** Ends the backends of a replaced pool that the server still keeps (their client is gone). */
const END_BACKENDS = 'SELECT count(pg_terminate_backend(pid))::int AS ended FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()'

export class ReplaceablePool {
  /** The pool to use now: read it for each statement, never keep it. */
  current: SQL
  private name: string
  private generation = 1
  private checking = false
  private closed = false

  /**
   * `label`: the instance and the pool's use, as PostgreSQL shows it (`keyward 3f2a9c1e main`);
   * `make`: a new pool whose connections carry `applicationName`; `asking`: the instance's
   * connections that ask the database (`askDatabase`), which its close ends.
   */
  constructor(
    private readonly url: string,
    private readonly label: string,
    private readonly make: (applicationName: string) => SQL,
    private readonly answerTimeoutMs: number,
    private readonly asking: Set<SQL>,
  ) {
    this.name = `${label} ${this.generation}`
    this.current = make(this.name)
  }

  /**
   * A statement of this pool, `answer`, unanswered at its deadline: if it still is ASK_AFTER_MS
   * later (or the answer timeout, if shorter), the database is asked whether it is at work for the
   * pool, and if not the pool is replaced.
   */
  unanswered(answer: Promise<unknown>): void {
    const pool = this.current
    let answered = false
    answer.then(
      () => (answered = true),
      () => (answered = true),
    )
    setTimeout(() => {
      if (!answered && pool === this.current) void this.replaceIfIdle(() => !answered)
    }, Math.min(ASK_AFTER_MS, this.answerTimeoutMs)).unref()
  }

  /**
   * Replaces the pool when none of its connections is at work in the database: a new pool takes the
   * statements from now on; the old one is closed (what still waits there fails as on a closed
   * connection: reads try again on the new pool; a transaction's COMMIT in flight has an unknown
   * outcome, a 503 as on any lost connection), and the backends the server still keeps for it are
   * ended, so that the instance holds no more connections than its size. A database that cannot be
   * asked (it cannot be reached, or does not answer) changes nothing.
   */
  private async replaceIfIdle(stillUnanswered: () => boolean): Promise<void> {
    if (this.checking || this.closed) return
    this.checking = true
    const [pool, name] = [this.current, this.name]
    try {
      // Each ask may take the answer timeout, and the wait between them.
      const idle = await askDatabase(this.url, `${this.label} check`, this.asking, 2 * this.answerTimeoutMs + ASK_AGAIN_AFTER_MS, async (asked) => {
        for (let ask = 0; ask < 2; ask++) {
          if (ask > 0) await Bun.sleep(ASK_AGAIN_AFTER_MS)
          const [{ working }] = await asked.unsafe(WORKING, [name, this.answerTimeoutMs])
          if (working > 0 || !stillUnanswered()) return false
        }
        return true
      })
      if (!idle || !stillUnanswered() || this.closed || pool !== this.current) return
      this.generation++
      this.name = `${this.label} ${this.generation}`
      this.current = this.make(this.name)
      pool.close({ timeout: 0 }).catch(() => {})
      void endBackends(this.url, `${this.label} check`, this.asking, name, this.answerTimeoutMs)
    } finally {
      this.checking = false
    }
  }

  close(timeout: number): Promise<void> {
    this.closed = true
    return this.current.close({ timeout })
  }
}

/**
 * Ends the backends the server still keeps for connections named `name` that keyward has given up
 * on (a replaced pool's, or the readiness probe's or generation read's that went unanswered), so
 * that the instance holds no more connections than its size; best effort, on a connection of its own.
 */
export function endBackends(url: string, asker: string, asking: Set<SQL>, name: string, answerTimeoutMs: number): Promise<unknown> {
  return askDatabase(url, asker, asking, answerTimeoutMs, (asked) => asked.unsafe(END_BACKENDS, [name]))
}

/**
 * `question` on a new connection named `asker`, which is closed after; undefined when the database
 * cannot be reached or `question` is not done within `limitMs`: nothing learnt. The connection is in
 * `asking` while it is open, so that the instance's close can end it at once (a stop waited for a
 * check of a silent database for twice the answer timeout: found in review, 2026-11-30).
 */
async function askDatabase<T>(url: string, asker: string, asking: Set<SQL>, limitMs: number, question: (asked: SQL) => Promise<T>): Promise<T | undefined> {
  const asked = new SQL({ url, max: 1, connectionTimeout: 2, connection: { application_name: asker } })
  asking.add(asked)
  try {
    return await answeredWithin(question(asked), limitMs)
  } catch {
    return undefined
  } finally {
    asking.delete(asked)
    asked.close({ timeout: 0 }).catch(() => {})
  }
}
