/**
 * Rate limits (docs/operations.md "Rate limits"): a token bucket per token,
 * and per client address for requests without a valid token. Each holds up to `2N` requests (the
 * burst) and refills at N per second.
 *
 * The memory held is bounded (docs/security.md): at most MAX_BUCKETS buckets. A full bucket says
 * nothing a new one would not, so when the bound is reached those are dropped first; only if too
 * few are full (more than MAX_BUCKETS clients active within two seconds) are the oldest dropped,
 * which at worst hands such a client a fresh bucket.
 */

export const MAX_BUCKETS = 50_000

export interface Allowance {
  readonly allowed: boolean
  /** Requests left in the bucket now. */
  readonly remaining: number
  /** Seconds until the bucket is full again. */
  readonly resetSeconds: number
  /** When refused: seconds until one request is allowed again (at least 1). */
  readonly retryAfterSeconds: number
}

interface Bucket {
  tokens: number
  /** performance.now() of the last refill. */
  updated: number
}

export class RateLimiter {
  readonly burst: number
  private readonly buckets = new Map<string, Bucket>()

  constructor(
    /** Requests per second; 0 would be no limit, and has no limiter (see `serve --rate-limit`). */
    readonly perSecond: number,
    private readonly maxBuckets = MAX_BUCKETS,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.burst = 2 * perSecond
  }

  /** Takes one request from `key`'s bucket, if it has one left. */
  take(key: string): Allowance {
    const now = this.clock()
    let bucket = this.buckets.get(key)
    if (bucket) {
      bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.updated) / 1000) * this.perSecond)
      bucket.updated = now
    } else {
      if (this.buckets.size >= this.maxBuckets) this.makeRoom(now)
      this.buckets.set(key, (bucket = { tokens: this.burst, updated: now }))
    }
    const allowed = bucket.tokens >= 1
    if (allowed) bucket.tokens -= 1
    return {
      allowed,
      remaining: Math.floor(bucket.tokens),
      resetSeconds: Math.ceil((this.burst - bucket.tokens) / this.perSecond),
      retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((1 - bucket.tokens) / this.perSecond)),
    }
  }

  /** Buckets held now (tests, and the bound). */
  get size(): number {
    return this.buckets.size
  }

  /** Drops the buckets that have refilled; if that frees less than a tenth, the oldest too. */
  private makeRoom(now: number): void {
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.updated) / 1000) * this.perSecond >= this.burst) this.buckets.delete(key)
    }
    const target = this.maxBuckets - Math.ceil(this.maxBuckets / 10)
    for (const key of this.buckets.keys()) {
      if (this.buckets.size <= target) break
      this.buckets.delete(key)
    }
  }
}
