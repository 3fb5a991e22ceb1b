/** The server's resident memory (VmRSS) over the load, and whether it shows a leak. */

/**
 * Memory growth that fails the run, judged over the middle and last thirds (the first is warm-up:
 * the heap fills, the clients create most of their records): a fitted slope above 24 MiB/min AND a
 * last-third mean above the middle-third mean by more than what that slope adds between the two
 * (24 MiB/min × a third of the run: 8 MiB for 60 s), and at least 8 MiB. Both are judged on the
 * RSS less the audit trail at its budget (AUDIT_EVENT_BUDGET_BYTES a stored event): every acknowledged
 * change adds an event that is kept (README "Audit trail"), some 2,000 a second here, about 25 MiB/min
 * at the 210 bytes an event takes, so the raw RSS grows by design. Why these:
 *   - the records cannot account for it: every client together may create at most
 *     clients × (10 + 10 + 16 + 40 + 2) records, about 5,000 for 64 clients, a few MiB even if all
 *     came late (and nearly all are made in the first third);
 *   - runs on a healthy server show the RSS of the JSC heap swinging by about 10 MiB between
 *     collections, the thirds' means within ±4 MiB, the fitted slope within ±13 MiB/min;
 *   - a leak shows up above it: at the 6,000-14,000 requests/s this 2-core machine serves,
 *     24 MiB/min is 30-70 bytes per request, less than one small object kept per request; so does
 *     an audit trail over its memory budget.
 * Both must hold, so a late GC swing (a step without a trend) or a trend within the noise does not
 * fail the run. Checked once with a server preloaded to keep a 64-byte array per request (~125 bytes
 * with its header): slope 54 MiB/min, +20 MiB between the thirds, flagged.
 */
const MIN_GROWTH_THRESHOLD_MIB = 8
const SLOPE_THRESHOLD_MIB_PER_MIN = 24
const MIN_SAMPLES_TO_JUDGE = 30
/** An audit event's memory budget: the goal of docs/performance.md "The audit trail's cost", above the measured ~210 bytes. */
export const AUDIT_EVENT_BUDGET_BYTES = 256

/** One second's sample: seconds since the load began, VmRSS in bytes, stored audit events (null: not read). */
export type MemorySample = readonly [seconds: number, rss: number, auditEvents: number | null]

export interface MemoryAnalysis {
  readonly samples: number
  readonly firstMiB: number
  readonly lastMiB: number
  readonly maxMiB: number
  /** Audit events stored at the first and last sample that read them. */
  readonly auditEventsFirst: number | null
  readonly auditEventsLast: number | null
  /** Raw VmRSS: its least-squares slope over the middle and last thirds (the first is warm-up), MiB per minute. */
  readonly rawSlopeMiBPerMin: number
  /** The judged series (VmRSS less the audit trail at its budget): the thirds' means and its slope. */
  readonly middleThirdMeanMiB: number
  readonly lastThirdMeanMiB: number
  readonly slopeMiBPerMin: number
  /** The judged slope as bytes per request served over the same span. */
  readonly slopeBytesPerRequest: number
  readonly thresholdMiB: number
  readonly thresholdSlopeMiBPerMin: number
  /** null: too few samples to judge. */
  readonly growing: boolean | null
}

/** Middle and last thirds of the samples, least-squares slopes over both, and the verdict. */
export function analyseMemory(samples: readonly MemorySample[], requestsPerSecond: number): MemoryAnalysis {
  const duration = samples.length ? samples[samples.length - 1]![0] : 0
  const growthThreshold = Math.max(MIN_GROWTH_THRESHOLD_MIB, (SLOPE_THRESHOLD_MIB_PER_MIN * duration) / 3 / 60)
  const MiB = 1024 * 1024
  const raw = samples.map(([, rss]) => rss / MiB)
  // A sample whose event count could not be read counts the trail as the sample before did.
  let events = 0
  const judged = samples.map(([, rss, auditEvents]) => {
    if (auditEvents !== null) events = auditEvents
    return (rss - events * AUDIT_EVENT_BUDGET_BYTES) / MiB
  })
  const counted = samples.map(([, , auditEvents]) => auditEvents).filter((count): count is number => count !== null)
  const third = Math.floor(samples.length / 3)
  const minutes = samples.slice(third).map(([t]) => t / 60)
  const growth = mean(judged.slice(2 * third)) - mean(judged.slice(third, 2 * third))
  const slope = leastSquaresSlope(minutes, judged.slice(third))
  return {
    samples: samples.length,
    firstMiB: raw[0] ?? NaN,
    lastMiB: raw[raw.length - 1] ?? NaN,
    maxMiB: raw.length ? Math.max(...raw) : NaN,
    auditEventsFirst: counted[0] ?? null,
    auditEventsLast: counted[counted.length - 1] ?? null,
    rawSlopeMiBPerMin: leastSquaresSlope(minutes, raw.slice(third)),
    middleThirdMeanMiB: mean(judged.slice(third, 2 * third)),
    lastThirdMeanMiB: mean(judged.slice(2 * third)),
    slopeMiBPerMin: slope,
    slopeBytesPerRequest: requestsPerSecond > 0 ? (slope * MiB) / 60 / requestsPerSecond : NaN,
    thresholdMiB: Math.round(growthThreshold * 10) / 10,
    thresholdSlopeMiBPerMin: SLOPE_THRESHOLD_MIB_PER_MIN,
    growing: samples.length >= MIN_SAMPLES_TO_JUDGE ? growth > growthThreshold && slope > SLOPE_THRESHOLD_MIB_PER_MIN : null,
  }
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN)

function leastSquaresSlope(xs: readonly number[], ys: readonly number[]): number {
  if (xs.length < 2) return NaN
  const mx = mean(xs)
  const my = mean(ys)
  let num = 0
  let den = 0
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my)
    den += (xs[i]! - mx) ** 2
  }
  return den > 0 ? num / den : NaN
}

export async function vmRss(pid: number): Promise<number | null> {
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(await Bun.file(`/proc/${pid}/status`).text())
    return match ? Number(match[1]) * 1024 : null
  } catch {
    return null
  }
}

/** Audit events the server stores, from its /metrics (`keyward_records`); null when it does not answer. */
export async function auditEventCount(url: string, vendorToken: string): Promise<number | null> {
  try {
    const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${vendorToken}` } })
    const match = /^keyward_records\{table="audit_events"\} (\d+)$/m.exec(await res.text())
    return match ? Number(match[1]) : null
  } catch {
    return null
  }
}
