/** What a load run reports. */
import type { MachineSecond } from './machine'
import type { MemoryAnalysis, MemorySample } from './memory'

export interface KindStats {
  readonly kind: string
  readonly count: number
  readonly unexpected: number
  /** Answers by status ("error" for no answer). */
  readonly statuses: Record<string, number>
  readonly p50: number
  readonly p99: number
  readonly max: number
}

export interface LoadReport {
  readonly seed: number
  readonly seconds: number
  readonly clients: number
  readonly tenants: number
  readonly tokens: number
  readonly compactAfterBytes: number
  readonly setupMs: number
  readonly durationMs: number
  readonly requests: number
  readonly unexpectedCount: number
  /** The first unexpected answers, one line each. */
  readonly unexpected: string[]
  readonly unexpectedByCategory: Record<string, number>
  readonly kinds: KindStats[]
  /** Requests by scenario: normal, cross-tenant, forbidden, conflict, ... */
  readonly scenarios: Record<string, number>
  readonly statuses: Record<string, number>
  /** Answers completed in each second of the run. */
  readonly perSecond: number[]
  /** [seconds since the load started, VmRSS bytes]. */
  readonly rss: MemorySample[]
  readonly memory: MemoryAnalysis
  /** Log segments seen during the run (each compaction starts one). */
  readonly segmentsSeen: number
  /** When each new log segment was first seen (s since the load started): about when a compaction ran. */
  readonly segmentTimes: number[]
  /** The slowest requests: [ms, started at (s since the load started), request kind]. */
  readonly slowest: [number, number, string][]
  /** The machine, second by second (CPU of the server, the clients and everything else; I/O stall). */
  readonly machine: MachineSecond[]
  /** Records per kind at the end, as the vendor reads them. */
  readonly recordsAtEnd: Record<string, number>
  /** Records created during the middle and last thirds of the run (bounded data: should be small). */
  readonly recordsCreatedAfterWarmup: number
  readonly finalChecks: number
  readonly serverExitCode: number
  /** What the server wrote on stderr besides its usual start and stop lines. */
  readonly serverStderr: string[]
}
