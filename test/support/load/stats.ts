/** The load's statistics: latencies, statuses and scenarios by request kind, unexpected answers, the slowest requests. */
import type { Step } from './model'
import type { KindStats } from './report'

const MAX_UNEXPECTED_LINES = 60
const SLOWEST = 10

export class Stats {
  private readonly latencies = new Map<string, number[]>()
  private readonly statusesByKind = new Map<string, Record<string, number>>()
  private readonly unexpectedByKind = new Map<string, number>()
  readonly scenarios: Record<string, number> = {}
  readonly statuses: Record<string, number> = {}
  readonly unexpectedByCategory: Record<string, number> = {}
  readonly unexpectedLines: string[] = []
  readonly perSecond: number[] = []
  unexpectedCount = 0
  requests = 0
  startedAt = 0
  /** The slowest requests: [ms, started at (s since the load started), what]. */
  readonly slowest: [number, number, string][] = []

  record(step: Step, status: string, ms: number): void {
    this.requests++
    let list = this.latencies.get(step.kind)
    if (!list) this.latencies.set(step.kind, (list = []))
    list.push(ms)
    let statuses = this.statusesByKind.get(step.kind)
    if (!statuses) this.statusesByKind.set(step.kind, (statuses = {}))
    statuses[status] = (statuses[status] ?? 0) + 1
    this.statuses[status] = (this.statuses[status] ?? 0) + 1
    this.scenarios[step.scenario] = (this.scenarios[step.scenario] ?? 0) + 1
    const second = Math.floor((performance.now() - this.startedAt) / 1000)
    while (this.perSecond.length <= second) this.perSecond.push(0)
    this.perSecond[second]!++
    if (this.slowest.length < SLOWEST || ms > this.slowest[this.slowest.length - 1]![0]) {
      this.slowest.push([ms, (performance.now() - ms - this.startedAt) / 1000, `${step.method} ${step.kind.split(' ')[1]}`])
      this.slowest.sort((a, b) => b[0] - a[0])
      if (this.slowest.length > SLOWEST) this.slowest.pop()
    }
  }

  unexpected(category: string, line: string, kind?: string): void {
    this.unexpectedCount++
    this.unexpectedByCategory[category] = (this.unexpectedByCategory[category] ?? 0) + 1
    if (kind) this.unexpectedByKind.set(kind, (this.unexpectedByKind.get(kind) ?? 0) + 1)
    if (this.unexpectedLines.length < MAX_UNEXPECTED_LINES) this.unexpectedLines.push(`${category}: ${line}`)
  }

  kinds(): KindStats[] {
    return [...this.latencies.entries()]
      .map(([kind, list]) => {
        const sorted = Float64Array.from(list).sort()
        const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
        return {
          kind,
          count: sorted.length,
          unexpected: this.unexpectedByKind.get(kind) ?? 0,
          statuses: this.statusesByKind.get(kind)!,
          p50: at(0.5),
          p99: at(0.99),
          max: sorted[sorted.length - 1]!,
        }
      })
      .sort((a, b) => a.kind.localeCompare(b.kind))
  }
}
