/** The server's resident memory (VmRSS) over the load, and whether it shows a leak. */

/**
 * Memory growth that fails the run, judged over the middle and last thirds (the first is warm-up:
 * the heap fills, the clients create most of their records): a fitted slope above 24 MiB/min AND a
 * last-third mean above the middle-third mean by more than what that slope adds between the two
 * (24 MiB/min × a third of the run: 8 MiB for 60 s), and at least 8 MiB. Why these:
 *   - the data cannot account for it: every client together may create at most
 *     clients × (10 + 10 + 16 + 40 + 2) records, about 5,000 for 64 clients, a few MiB even if all
 *     came late (and nearly all are made in the first third);
 *   - runs on a healthy server show the RSS of the JSC heap swinging by about 10 MiB between
 *     collections, the thirds' means within ±4 MiB, the fitted slope within ±13 MiB/min;
 *   - a leak shows up above it: at the 6,000-12,000 requests/s this 2-core machine serves,
 *     24 MiB/min is 35-70 bytes per request, less than one small object kept per request.
 * Both must hold, so a late GC swing (a step without a trend) or a trend within the noise does not
 * fail the run. Checked once with a server preloaded to keep a 64-byte array per request (~125 bytes
 * with its header): slope 54 MiB/min, +20 MiB between the thirds, flagged.
 */
const MIN_GROWTH_THRESHOLD_MIB = 8
const SLOPE_THRESHOLD_MIB_PER_MIN = 24
const MIN_SAMPLES_TO_JUDGE = 30

export interface MemoryAnalysis {
  readonly samples: number
  readonly firstMiB: number
  readonly lastMiB: number
  readonly maxMiB: number
  readonly middleThirdMeanMiB: number
  readonly lastThirdMeanMiB: number
  /** Least-squares slope over the middle and last thirds (the first is warm-up), MiB per minute. */
  readonly slopeMiBPerMin: number
  /** The slope as bytes per request served over the same span. */
  readonly slopeBytesPerRequest: number
  readonly thresholdMiB: number
  readonly thresholdSlopeMiBPerMin: number
  /** null: too few samples to judge. */
  readonly growing: boolean | null
}

/** Middle and last thirds of the samples, a least-squares slope over both, and the verdict. */
export function analyseMemory(samples: readonly [number, number][], requestsPerSecond: number): MemoryAnalysis {
  const duration = samples.length ? samples[samples.length - 1]![0] : 0
  const growthThreshold = Math.max(MIN_GROWTH_THRESHOLD_MIB, (SLOPE_THRESHOLD_MIB_PER_MIN * duration) / 3 / 60)
  const MiB = 1024 * 1024
  const values = samples.map(([, rss]) => rss / MiB)
  const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN)
  const third = Math.floor(samples.length / 3)
  const middle = values.slice(third, 2 * third)
  const last = values.slice(2 * third)
  const span = samples.slice(third)
  let slope = NaN
  if (span.length >= 2) {
    const xs = span.map(([t]) => t / 60)
    const ys = span.map(([, rss]) => rss / MiB)
    const mx = mean(xs)
    const my = mean(ys)
    let num = 0
    let den = 0
    for (let i = 0; i < xs.length; i++) {
      num += (xs[i]! - mx) * (ys[i]! - my)
      den += (xs[i]! - mx) ** 2
    }
    slope = den > 0 ? num / den : NaN
  }
  const growth = mean(last) - mean(middle)
  const judged = samples.length >= MIN_SAMPLES_TO_JUDGE
  return {
    samples: samples.length,
    firstMiB: values[0] ?? NaN,
    lastMiB: values[values.length - 1] ?? NaN,
    maxMiB: values.length ? Math.max(...values) : NaN,
    middleThirdMeanMiB: mean(middle),
    lastThirdMeanMiB: mean(last),
    slopeMiBPerMin: slope,
    slopeBytesPerRequest: requestsPerSecond > 0 ? (slope * MiB) / 60 / requestsPerSecond : NaN,
    thresholdMiB: Math.round(growthThreshold * 10) / 10,
    thresholdSlopeMiBPerMin: SLOPE_THRESHOLD_MIB_PER_MIN,
    growing: judged ? growth > growthThreshold && slope > SLOPE_THRESHOLD_MIB_PER_MIN : null,
  }
}

export async function vmRss(pid: number): Promise<number | null> {
  try {
    const match = /^VmRSS:\s+(\d+) kB/m.exec(await Bun.file(`/proc/${pid}/status`).text())
    return match ? Number(match[1]) * 1024 : null
  } catch {
    return null
  }
}
