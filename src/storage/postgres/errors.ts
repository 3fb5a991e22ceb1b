/**
 * How PostgreSQL failures are told apart (docs/storage.md, "PostgreSQL"): a lost or refused
 * connection is `DatabaseUnavailableError` (answered 503 `database_unavailable`); a serialization
 * failure or deadlock makes the transaction run again; a unique violation is the caller's rule.
 */

/**
 * The database cannot serve this now (down, restarting, connection lost; or too slow, or every
 * connection busy: `summary` says which, for the log line an operator reads, docs/operations.md);
 * nothing was changed, or the outcome is unknown.
 */
export class DatabaseUnavailableError extends Error {
  constructor(
    override readonly cause: unknown,
    summary: DatabaseUnavailability = summaryOf(cause),
  ) {
    super(`${summary}: ${(cause as Error)?.message ?? String(cause)}`)
    this.name = 'DatabaseUnavailableError'
    this.reason = REASONS[summary]
  }

  /** The summary as the `reason` label of the metrics' count of 503s (docs/operations.md, "Metrics"). */
  readonly reason: string
}

const REASONS: Record<DatabaseUnavailability, string> = {
  'the database cannot be reached': 'database_unreachable',
  "the database lacks keyward's tables": 'database_tables_missing',
  'the database did not answer in time': 'database_timeout',
  'no database connection was free in time': 'database_pool_busy',
  'the database was too busy for this change': 'database_contention',
}

/** What a `database unavailable` line says first (docs/operations.md, "Logs"). */
export type DatabaseUnavailability =
  | 'the database cannot be reached'
  | "the database lacks keyward's tables"
  | 'the database did not answer in time'
  | 'no database connection was free in time'
  | 'the database was too busy for this change'

/**
 * The database's own verdicts by their SQLSTATE: a statement it gave up on (57014: its
 * `statement_timeout` or a cancel; 55P03: `lock_timeout`; 25P03: idle in a transaction too long)
 * did not answer in time; a serialization failure or deadlock still failing after its retries was
 * too busy; a table missing (42P01) is said so, not as a network's fault (docs review, 2026-11-30);
 * anything else could not be reached.
 */
function summaryOf(cause: unknown): DatabaseUnavailability {
  const state = sqlState(cause)
  if (state === '42P01') return "the database lacks keyward's tables"
  if (state === '57014' || state === '55P03' || state === '25P03') return 'the database did not answer in time'
  if (state === '40001' || state === '40P01') return 'the database was too busy for this change'
  return 'the database cannot be reached'
}

interface ClientError {
  /** Bun's own code (`ERR_POSTGRES_CONNECTION_CLOSED`), or a system one (`ECONNREFUSED`). */
  readonly code?: string
  /** The server's SQLSTATE (`23505`). */
  readonly errno?: string | number
  readonly constraint?: string
}

const sqlState = (error: unknown): string | undefined => {
  const errno = (error as ClientError | null)?.errno
  return typeof errno === 'string' ? errno : undefined
}

/** The constraint a unique violation (23505) broke; undefined for any other error. */
export function violatedConstraint(error: unknown): string | undefined {
  return sqlState(error) === '23505' ? ((error as ClientError).constraint ?? '') : undefined
}

/** 40001 serialization_failure, 40P01 deadlock_detected: the transaction may simply run again. */
export const isRetryable = (error: unknown) => sqlState(error) === '40001' || sqlState(error) === '40P01'

const LOST_CONNECTION_CODES = new Set([
  'ERR_POSTGRES_CONNECTION_CLOSED',
  'ERR_POSTGRES_CONNECTION_FAILED',
  'ERR_POSTGRES_CONNECTION_REFUSED',
  'ERR_POSTGRES_CONNECTION_TIMEOUT',
  'ERR_POSTGRES_IDLE_TIMEOUT',
  'ERR_POSTGRES_LIFETIME_TIMEOUT',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  // A host name that does not resolve (now).
  'ENOTFOUND',
  'EAI_AGAIN',
  // A server certificate refused (sslmode=verify-ca, verify-full): a rotation gone wrong, say.
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_SIGNATURE_FAILURE',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
])

/** The server closed this connection (a restart, pg_terminate_backend): another one may work. */
const CLOSED_CONNECTION_CODES = new Set(['ERR_POSTGRES_CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE'])

/**
 * A connection the server had closed, found out only when used (57P01 admin shutdown, 57P02 crash
 * shutdown, or the socket already closed): worth another try on another connection. A refused or
 * timed-out connect is not (a new connection was just tried).
 */
export function isClosedConnection(error: unknown): boolean {
  const state = sqlState(error)
  if (state) return state === '57P01' || state === '57P02'
  const code = (error as ClientError | null)?.code
  return typeof code === 'string' && CLOSED_CONNECTION_CODES.has(code)
}

/**
 * SQLSTATEs of a database that cannot serve keyward now, whatever the statement: dropped or missing
 * (3D000), without keyward's tables (42P01: created again empty, or a restore under way; keyward's
 * statements name only its own tables, which its migrations make before it serves), not accepting
 * connections (55000: `ALLOW_CONNECTIONS false`), refusing this login
 * (28000, 28P01), a standby after a failover (25006: read-only), giving up on a statement that
 * waited for a lock past its `lock_timeout` (55P03), or closing a session idle in a transaction
 * past its `idle_in_transaction_session_timeout` (25P03). Besides these, class 53 (out of
 * resources: connections, disk, memory) and class 57 (operator intervention: shutting down or
 * starting, 57P01-57P04; a statement cancelled by its `statement_timeout` or `pg_cancel_backend`,
 * 57014). Managed services often set those timeouts: what they end is the same `503` as keyward's
 * own `--database-timeout` gives (README, "Database mode"), never a 500.
 */
const UNAVAILABLE_STATES = new Set(['3D000', '42P01', '55000', '28000', '28P01', '25006', '55P03', '25P03'])

/**
 * The connection was refused or lost, or the database cannot serve now: classes 08 (connection
 * exception), 53 and 57, the states above, or the client's own codes (a TLS connection refused
 * too: found in review, 2026-11-30, answered 500 while /readyz said 503).
 */
export function isConnectionLost(error: unknown): boolean {
  if (error instanceof DatabaseUnavailableError) return true
  const state = sqlState(error)
  if (state) return state.startsWith('08') || state.startsWith('53') || state.startsWith('57') || UNAVAILABLE_STATES.has(state)
  const code = (error as ClientError | null)?.code
  // ERR_POSTGRES_TLS_*: the server would not speak TLS where the URL asks for it, or the handshake failed.
  return typeof code === 'string' && (LOST_CONNECTION_CODES.has(code) || code.startsWith('ERR_POSTGRES_TLS_'))
}
