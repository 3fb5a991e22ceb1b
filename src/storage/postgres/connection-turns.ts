/**
 * Tenants' turns at a pool's connections (docs/storage.md, "Plans" and "Turns at the connections"):
 * a list or transaction runs only with one of the `slots` (one per connection of its pool), and
 * tenants share them. A tenant holds at most all but one at once (of a single one, all: then the
 * tenants only take turns for it), so another tenant's work finds one free or waits for the next to
 * come free, never behind a queue of the first tenant's; waiting work goes in turn per tenant, each
 * tenant's in order, by start-time fair queueing on the time work holds a slot (`tags`), so that
 * turns are shared by the time they take, not by their count.
 *
 * Without this a pool serves first come, first served: a tenant's slow text searches on eight list
 * connections held a small tenant's page 33 times longer, and a tenant with two thousand changes in
 * flight held another's one create until its `--database-timeout` (503; review, 2026-11-30). In the
 * order the tenants began waiting instead, a tenant whose work queued before another's arrived went
 * first again when its running work ended: on one slot the other waited for two of its lists (review,
 * 2026-11-30: half the small tenant's pages 503 behind 5 s searches). Turns by count gave a tenant
 * of 1 ms pages one turn per 30 ms page of a big tenant's: its pages were held to the big tenant's
 * rate, 45 a second instead of 1,400, and queued for seconds (review, 2026-11-30).
 */
import { DatabaseUnavailableError } from './errors'

/** Work let in with less time than this left is not sent: it would run on after its caller was answered 503. */
const MIN_TIME_LEFT_MS = 50

/** Idle tenants' tags are looked through for ones to forget once this many are kept. */
const TAGS_SWEPT_AT = 256

/**
 * A tenant idle this long starts at the virtual clock again: its tag may hold time that nobody
 * else wanted (a long list when no other tenant was waiting), which is no debt (review, 2026-11-30:
 * a 5 s list run alone was charged 30 s later, and the tenant's next request waited until 503 behind
 * twenty others). Short gaps keep the tag, as fair queueing needs (`tags`).
 */
const IDLE_FORGET_MS = 1000

interface Waiter {
  readonly admit: () => void
  readonly timer: ReturnType<typeof setTimeout>
}

/** A slot taken: whether it was waited for, and the work's start on the virtual clock (`ConnectionTurns.tags`). */
interface Admission {
  readonly queued: boolean
  readonly start: number
}

export class ConnectionTurns {
  private free: number
  private readonly perTenant: number
  /** Work running, by tenant. */
  private readonly running = new Map<string, number>()
  /** Work waiting, by tenant, each tenant's in the order it came. */
  private readonly waiting = new Map<string, Waiter[]>()
  /** When each tenant with work running or waiting last took a slot (a count of takes): the tie-break. */
  private readonly lastServed = new Map<string, number>()
  private takes = 0
  /**
   * Start-time fair queueing by the time work holds a slot. A virtual clock (`virtualNow`) stands at
   * the start of the work let in last and never goes back; a tenant's next work starts at its tag or
   * at the clock, whichever is later, and a work that held a slot d ms moves its tenant's tag to d
   * past where it started. The least start goes first, so turns are shared by time, not by count,
   * and a tenant that used little (or has just come) is never more than the clock ahead of others.
   * A tag is kept after its tenant goes idle while it is ahead of the clock (IDLE_FORGET_MS at most): forgotten at once, a
   * tenant sending one request at a time came back at the front every time, and twenty of them held
   * out a tenant with two at once until every request of it was 503 (review, 2026-11-30).
   */
  private readonly tags = new Map<string, number>()
  private virtualNow = 0
  /** When each idle tenant whose tag is kept went idle (`now()`): kept no longer than IDLE_FORGET_MS. */
  private readonly idleSince = new Map<string, number>()

  constructor(
    private readonly slots: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.free = slots
    this.perTenant = Math.max(1, slots - 1)
  }

  /**
   * Runs `work` once `tenant` has a slot, and holds the slot until `work` is done (its connection is
   * busy until then, answered or not). DatabaseUnavailableError, and `work` never runs, if no slot
   * came before `deadline` (a `performance.now()` time) or too little time is left by then to answer.
   */
  async run<T>(tenant: string, deadline: number, work: () => Promise<T>): Promise<T> {
    this.backFromIdle(tenant)
    const { queued, start } = await this.acquire(tenant, deadline - performance.now())
    const began = this.now()
    try {
      if (deadline - performance.now() < MIN_TIME_LEFT_MS) {
        // Said as what used the time up: the wait for a connection, or the request's earlier steps.
        if (queued) throw new DatabaseUnavailableError(new Error('a connection came free with too little of --database-timeout left to send this'), 'no database connection was free in time')
        throw new DatabaseUnavailableError(new Error("the request's earlier steps left too little of --database-timeout to send this one"), 'the database did not answer in time')
      }
      return await work()
    } finally {
      this.release(tenant, start, this.now() - began)
    }
  }

  /** `tenant` competes again: a tag kept over a long idle time is dropped (IDLE_FORGET_MS). */
  private backFromIdle(tenant: string): void {
    const since = this.idleSince.get(tenant)
    if (since === undefined) return
    this.idleSince.delete(tenant)
    if (this.now() - since >= IDLE_FORGET_MS) this.tags.delete(tenant)
  }

  /** Where `tenant`'s next work starts on the virtual clock. */
  private startOf(tenant: string): number {
    return Math.max(this.virtualNow, this.tags.get(tenant) ?? 0)
  }

  /** Takes a slot for `tenant`, at once or after waiting in line. */
  private acquire(tenant: string, ms: number): Promise<Admission> | Admission {
    if (this.free > 0 && (this.running.get(tenant) ?? 0) < this.perTenant && !this.waiting.has(tenant)) return { queued: false, start: this.take(tenant) }
    return new Promise<Admission>((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          clearTimeout(waiter.timer)
          resolve({ queued: true, start: this.take(tenant) })
        },
        timer: setTimeout(() => {
          this.forget(tenant, waiter)
          reject(new DatabaseUnavailableError(new Error(`every connection of its pool (${this.slots}) was busy until --database-timeout`), 'no database connection was free in time'))
        }, Math.max(0, ms)),
      }
      const line = this.waiting.get(tenant)
      if (line) line.push(waiter)
      else this.waiting.set(tenant, [waiter])
    })
  }

  /** Gives `tenant` a slot; its work's start on the virtual clock, which moves there. */
  private take(tenant: string): number {
    const start = this.startOf(tenant)
    this.virtualNow = start
    this.free--
    this.running.set(tenant, (this.running.get(tenant) ?? 0) + 1)
    this.lastServed.set(tenant, ++this.takes)
    return start
  }

  private release(tenant: string, start: number, heldMs: number): void {
    // Past the later of where this work started and where the tenant's other work has moved it.
    this.tags.set(tenant, Math.max(this.tags.get(tenant) ?? 0, start) + heldMs)
    this.free++
    const left = this.running.get(tenant)! - 1
    if (left === 0) this.running.delete(tenant)
    else this.running.set(tenant, left)
    this.forgetIdle(tenant)
    this.admitNext()
  }

  /** Of the waiting tenants that may take a slot now, the one whose work starts first goes on (of those even, the one served least recently). */
  private admitNext(): void {
    if (this.free === 0) return
    let next: string | undefined
    let nextStart = Infinity
    let nextServed = Infinity
    for (const tenant of this.waiting.keys()) {
      if ((this.running.get(tenant) ?? 0) >= this.perTenant) continue
      const start = this.startOf(tenant)
      const served = this.lastServed.get(tenant) ?? 0
      if (start < nextStart || (start === nextStart && served < nextServed)) [next, nextStart, nextServed] = [tenant, start, served]
    }
    if (next === undefined) return
    const line = this.waiting.get(next)!
    const waiter = line.shift()!
    if (line.length === 0) this.waiting.delete(next)
    waiter.admit()
    if (this.tags.size >= TAGS_SWEPT_AT) this.forgetPassedTags()
  }

  /** A tenant with nothing running or waiting competes for nothing: its tag is kept only while ahead of the clock. */
  private forgetIdle(tenant: string): void {
    if (this.running.has(tenant) || this.waiting.has(tenant)) return
    this.lastServed.delete(tenant)
    if ((this.tags.get(tenant) ?? 0) <= this.virtualNow) this.tags.delete(tenant)
    else this.idleSince.set(tenant, this.now())
  }

  /** The tags of idle tenants that the clock has passed: they would start at the clock anyway. */
  private forgetPassedTags(): void {
    const now = this.now()
    for (const [tenant, tag] of this.tags) {
      if (this.running.has(tenant) || this.waiting.has(tenant)) continue
      if (tag <= this.virtualNow || now - this.idleSince.get(tenant)! >= IDLE_FORGET_MS) {
        this.tags.delete(tenant)
        this.idleSince.delete(tenant)
      }
    }
  }

  private forget(tenant: string, waiter: Waiter): void {
    const line = this.waiting.get(tenant)
    if (!line) return
    const at = line.indexOf(waiter)
    if (at !== -1) line.splice(at, 1)
    if (line.length === 0) this.waiting.delete(tenant)
    this.forgetIdle(tenant)
  }

  /** For tests: work running and waiting, and the tenants remembered. */
  get counts(): { readonly running: number; readonly waiting: number; readonly tenants: number } {
    let waiting = 0
    for (const line of this.waiting.values()) waiting += line.length
    let running = 0
    for (const count of this.running.values()) running += count
    return { running, waiting, tenants: this.lastServed.size }
  }
}
