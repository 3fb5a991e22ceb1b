/**
 * The crash loop (docs/storage.md), shared by test/process/crash-loop.test.ts (a few kills, in CI)
 * and bench/tools/crash-loop.ts (hundreds of kills, by hand).
 *
 * A real server process on one data dir; many concurrent clients, each owning one customer and
 * everything under it, doing every kind of write the API has. Every acknowledged (2xx) write's
 * answer is recorded as the record's latest acknowledged state. At a random instant the server is
 * SIGKILLed (sometimes in the middle of a graceful stop, while it writes its snapshot), restarted on
 * the same dir, and every record is read back and compared. Some restarts are themselves killed at
 * a random instant during start-up (recovery, torn-tail repair), and the server compacts every few
 * hundred KiB of log, so kills also land in the middle of compactions under load:
 *
 *   - a record's state must be its latest acknowledged state, or, if a write to it got no answer
 *     (the kill cut it off), the state that write would have made: unanswered writes may or may not
 *     have happened, acknowledged ones must have;
 *   - nothing may exist that no write created;
 *   - the audit trail matches the records (docs/api.md "Audit events"): every record has its one create
 *     event, whose changes hold the record's id and creation time, and its `modified` is the time of the newest event about it (a change that lost its
 *     event, or an event that lost its change, would leave the two apart); every event is about a
 *     record that exists; a token is revoked exactly when it has a revoke event.
 *
 * Each client writes its own records one request at a time, so "latest" is simply the last answer;
 * the concurrency (and the group commit it drives) comes from the many clients. After a restart the
 * model is re-read from the server, which settles what the unanswered writes did.
 */
import { CrashLoop } from './loop'
import type { CrashLoopOptions } from './options'
import type { CrashLoopReport } from './report'

export type { CrashLoopOptions } from './options'
export type { CrashLoopReport } from './report'

export async function runCrashLoop(options: CrashLoopOptions): Promise<CrashLoopReport> {
  const loop = new CrashLoop(options)
  return loop.run()
}
