/**
 * The series of GET /metrics (docs/operations.md "Metrics"), in Prometheus'
 * text format. Written by hand rather than with prom-client: the few series here are observed on
 * every request, and a per-route object found once per route costs the read path less than a
 * client library's label lookup on every observation (measured: docs/operations.md).
 *
 * Labels are bounded: a route is its template (or `unmatched`), a method one of the few HTTP
 * methods (or `other`), a status one of the few that exist. No organization or record id.
 */

/** Seconds; the read by id takes tens of microseconds, a write's fsync milliseconds. */
export const DURATION_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** A Prometheus histogram without labels of its own. */
export class Histogram {
  /** Per bucket (not cumulative), the last one for +Inf. */
  private readonly counts = new Array<number>(DURATION_BUCKETS.length + 1).fill(0)
  private sum = 0

  observe(seconds: number): void {
    let i = 0
    while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]!) i++
    this.counts[i]!++
    this.sum += seconds
  }

  /** Its `_bucket`, `_sum` and `_count` lines; `labels` is `key="value",` pairs (or empty). */
  render(name: string, labels: string): string {
    let text = ''
    let cumulative = 0
    for (let i = 0; i < DURATION_BUCKETS.length; i++) {
      cumulative += this.counts[i]!
      text += `${name}_bucket{${labels}le="${DURATION_BUCKETS[i]}"} ${cumulative}\n`
    }
    cumulative += this.counts[DURATION_BUCKETS.length]!
    const bare = labels.replace(/,$/, '')
    text += `${name}_bucket{${labels}le="+Inf"} ${cumulative}\n`
    text += `${name}_sum${bare ? `{${bare}}` : ''} ${this.sum}\n`
    text += `${name}_count${bare ? `{${bare}}` : ''} ${cumulative}\n`
    return text
  }
}

/** The requests of one route template and method: counts by status, and their durations. */
export class RouteSeries {
  readonly statuses = new Map<number, number>()
  readonly duration = new Histogram()

  constructor(
    readonly route: string,
    readonly method: string,
  ) {}

  observe(status: number, seconds: number): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1)
    this.duration.observe(seconds)
  }
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'])

/** A label value in the text format: backslash, quote and newline escaped. */
const labelValue = (value: string) => value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`))

export class Metrics {
  private readonly routes = new Map<string, RouteSeries>()
  /** One durable write: the log's append and fsync (embedded), a transaction's commit (database mode). */
  readonly storageWrites = new Histogram()
  /** 503 answers by why the storage could not serve them (a label value each, from a fixed few). */
  private readonly unavailable = new Map<string, number>()

  countUnavailable(reason: string): void {
    this.unavailable.set(reason, (this.unavailable.get(reason) ?? 0) + 1)
  }

  /** The series of `route` (a template, or `unmatched`) and `method`; made on first use. */
  series(route: string, method: string): RouteSeries {
    const label = METHODS.has(method) ? method : 'other'
    const key = `${label} ${route}`
    let series = this.routes.get(key)
    if (!series) this.routes.set(key, (series = new RouteSeries(route, label)))
    return series
  }

  render(records: Readonly<Record<string, number>>, version: string): string {
    let requests = '# HELP keyward_http_requests_total HTTP requests answered, by route template, method and status.\n# TYPE keyward_http_requests_total counter\n'
    let durations =
      '# HELP keyward_http_request_duration_seconds Time to answer a request, by route template and method.\n# TYPE keyward_http_request_duration_seconds histogram\n'
    for (const series of this.routes.values()) {
      const labels = `route="${labelValue(series.route)}",method="${series.method}",`
      for (const [status, count] of series.statuses) requests += `keyward_http_requests_total{${labels}status="${status}"} ${count}\n`
      durations += series.duration.render('keyward_http_request_duration_seconds', labels)
    }
    let text = requests + durations
    text += '# HELP keyward_storage_write_duration_seconds Time of one durable write (log append and fsync; database commit).\n'
    text += '# TYPE keyward_storage_write_duration_seconds histogram\n'
    text += this.storageWrites.render('keyward_storage_write_duration_seconds', '')
    text += "# HELP keyward_storage_unavailable_total Answers 503 because the storage could not serve the request, by reason.\n# TYPE keyward_storage_unavailable_total counter\n"
    for (const [reason, count] of this.unavailable) text += `keyward_storage_unavailable_total{reason="${reason}"} ${count}\n`
    text += '# HELP keyward_records Records per table (database mode: PostgreSQL\'s estimate).\n# TYPE keyward_records gauge\n'
    for (const [table, count] of Object.entries(records)) text += `keyward_records{table="${labelValue(table)}"} ${count}\n`
    text += '# HELP keyward_build_info The running keyward.\n# TYPE keyward_build_info gauge\n'
    text += `keyward_build_info{version="${labelValue(version)}"} 1\n`
    return text
  }
}
