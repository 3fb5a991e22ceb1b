/**
 * `npm test`: the whole suite on the embedded store, then the HTTP tests (test/http) again on
 * PostgreSQL (README, "Database mode"). Options are passed to both runs of `bun test`; a JUnit report
 * file of the second run gets `-postgres` before its extension (.ci/run counts both).
 *
 * Without a PostgreSQL server at KEYWARD_TEST_DATABASE_URL (default: the local one) the second
 * run is skipped with one line saying how to run it, unless KEYWARD_TEST_REQUIRE_DATABASE=1
 * (CI), which makes that a failure.
 */
import { databaseReachable, redacted, TEST_DATABASE_URL } from './support/database'

/**
 * A test's time limit: process tests start servers and wait for them, which takes more than bun's
 * default 5 s on a loaded machine. Given here because bunfig.toml's `[test] timeout` is not read by
 * the bun in use (1.4.5); `--timeout` on the command line wins.
 */
const TEST_TIMEOUT_MS = 30_000

const given = process.argv.slice(2)
const options = given.some((option) => option.startsWith('--timeout')) ? given : [`--timeout=${TEST_TIMEOUT_MS}`, ...given]

function bunTest(args: string[], env: Record<string, string | undefined>): Promise<number> {
  const proc = Bun.spawn([process.execPath, 'test', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit'] })
  return proc.exited
}

/** `--reporter-outfile=out/junit.xml` → `--reporter-outfile=out/junit-postgres.xml`. */
const forDatabaseRun = (option: string) =>
  option.replace(/^(--reporter-outfile=.*?)(\.[^./]*)?$/, (_, path: string, extension = '') => `${path}-postgres${extension}`)

const embedded = await bunTest(options, { KEYWARD_TEST_STORE: undefined })

let database = 0
if (await databaseReachable()) {
  console.log(`\n== the HTTP tests again, on PostgreSQL at ${redacted(TEST_DATABASE_URL)}\n`)
  database = await bunTest(['test/http', ...options.map(forDatabaseRun)], { KEYWARD_TEST_STORE: 'postgres' })
} else if (process.env.KEYWARD_TEST_REQUIRE_DATABASE === '1') {
  console.error(`database suite FAILED to start: no PostgreSQL answers at ${redacted(TEST_DATABASE_URL)} (KEYWARD_TEST_REQUIRE_DATABASE=1)`)
  database = 1
} else {
  console.log(`database suite skipped: no PostgreSQL at ${redacted(TEST_DATABASE_URL)}; run it with KEYWARD_TEST_DATABASE_URL=postgres://user@host:port/db npm test`)
}

process.exit(embedded !== 0 ? embedded : database)
