/**
 * The load run (docs/security.md), shared by bench/tools/load.ts (60 s, 64 clients, by hand) and
 * test/process/load.test.ts (a few seconds, in CI).
 *
 * A real server on a fresh data dir. Several tenants (customers, each with a partner whose token is
 * used and a second partner whose state is toggled; half of them enabled for virtual environments),
 * tokens for every tenant and role (the first by the real `issue-token` command, the rest by the
 * function it calls, with the data dir's secret), then many concurrent
 * clients for a fixed time, each belonging to one tenant, doing a mix of reads (by id, lists with
 * filters and paging, other tenants' ids) and writes (creates, updates, state changes, enrollments,
 * keysets with fresh P-256 keys).
 *
 * Every answer is classified as expected or unexpected. Each client writes only its own records, one
 * request at a time (like the crash loop), so it knows each record's state and the exact answer a
 * write must get: a deliberate no-op transition is an expected 409, a write with a viewer token an
 * expected 403, another tenant's id an expected 404 (or an empty list). Unexpected: any 5xx, any
 * other status than the one predicted, any 2xx to a cross-tenant request, any record of another
 * tenant in an answer, an answer whose body contradicts what the client knows, a timeout or a
 * connection error. At the end every record is read back with the vendor token and compared with
 * what the clients know (nothing lost, nothing created by a refused request).
 *
 * Meanwhile the server's resident memory (VmRSS) is sampled every second. Creates are bounded per
 * client, so the data stops growing early and a server that keeps growing under steady traffic leaks.
 */
import type { LoadOptions } from './options'
import type { LoadReport } from './report'
import { LoadRun } from './run'

export type { LoadOptions } from './options'
export type { KindStats, LoadReport } from './report'
export { analyseMemory, AUDIT_EVENT_BUDGET_BYTES, type MemoryAnalysis, type MemorySample } from './memory'
export type { MachineSecond } from './machine'

export async function runLoad(options: LoadOptions): Promise<LoadReport> {
  return new LoadRun(options).run()
}
