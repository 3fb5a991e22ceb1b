/**
 * Tenants' turns at a pool's connections (docs/storage.md, "Plans" and "Turns at the connections"):
 * a list or transaction runs only with one of the `slots` (one per connection of its pool), and
 * tenants share them. A tenant holds at most all but one at once (of a single one, all: then the
 * tenants only take turns for it), so another tenant's work finds one free or waits for the next to
 * come free, never behind a queue of the first tenant's; waiting work goes in turn per tenant, each
 * tenant's in order: first the tenant that has held the slots least time since it began to compete
 * (the least recently served of those even; none behind the longest by more than MAX_LAG_MS), so
 * that turns are shared by the time they take, not by their count.
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

/**
 * The most time a tenant may be behind the one that has held slots longest, when turns are chosen:
 * a tenant that used little for an hour (or one just come) goes first for this much of its own work
 * at most, not until it has caught up an hour of another's, which would hold that other out as long.
 */
const MAX_LAG_MS = 1000

interface Waiter {
  readonly admit: () => void
  readonly timer: ReturnType<typeof setTimeout>
}

export class ConnectionTurns {
  private free: number
  private readonly perTenant: number
  /** Work running, by tenant. */
  private readonly running = new Map<string, number>()
  /** Work waiting, by tenant, each tenant's in the order it came. */
  private readonly waiting = new Map<string, Waiter[]>()
  /** When each tenant with work running or waiting last took a slot (a count of takes). */
  private readonly lastServed = new Map<string, number>()
  private takes = 0
  /**
   * The time (ms) each tenant with work running or waiting has held slots, counted when each work
   * ends; a tenant beginning to compete starts at the least of the others', not at 0 (which would
   * let it go first until it had caught up with time others held before it came).
   */
  private readonly held = new Map<string, number>()

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
    if (!this.held.has(tenant)) this.held.set(tenant, Math.max(this.leastHeld(), this.mostHeld() - MAX_LAG_MS))
    const queued = await this.acquire(tenant, deadline - performance.now())
    const began = this.now()
    try {
      if (deadline - performance.now() < MIN_TIME_LEFT_MS) {
        // Said as what used the time up: the wait for a connection, or the request's earlier steps.
        if (queued) throw new DatabaseUnavailableError(new Error('a connection came free with too little of --database-timeout left to send this'), 'no database connection was free in time')
        throw new DatabaseUnavailableError(new Error("the request's earlier steps left too little of --database-timeout to send this one"), 'the database did not answer in time')
      }
      return await work()
    } finally {
      this.release(tenant, this.now() - began)
    }
  }

  /** The least time any tenant competing now has held slots (0 when none competes). */
  private leastHeld(): number {
    let least = Infinity
    for (const ms of this.held.values()) if (ms < least) least = ms
    return least === Infinity ? 0 : least
  }

  /** The most time any tenant competing now has held slots (0 when none competes). */
  private mostHeld(): number {
    let most = 0
    for (const ms of this.held.values()) if (ms > most) most = ms
    return most
  }

  /** Takes a slot for `tenant`, at once (false) or after waiting in line (true). */
  private acquire(tenant: string, ms: number): Promise<boolean> | boolean {
    if (this.free > 0 && (this.running.get(tenant) ?? 0) < this.perTenant && !this.waiting.has(tenant)) return (this.take(tenant), false)
    return new Promise<boolean>((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          clearTimeout(waiter.timer)
          this.take(tenant)
          resolve(true)
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

  private take(tenant: string): void {
    this.free--
    this.running.set(tenant, (this.running.get(tenant) ?? 0) + 1)
    this.lastServed.set(tenant, ++this.takes)
  }

  private release(tenant: string, heldMs: number): void {
    this.held.set(tenant, this.held.get(tenant)! + heldMs)
    this.free++
    const left = this.running.get(tenant)! - 1
    if (left === 0) this.running.delete(tenant)
    else this.running.set(tenant, left)
    this.forgetIdle(tenant)
    this.admitNext()
  }

  /** Of the waiting tenants that may take a slot now, the one that has held slots least time goes on (of those even, the one served least recently). */
  private admitNext(): void {
    if (this.free === 0) return
    const floor = this.mostHeld() - MAX_LAG_MS
    let next: string | undefined
    let nextHeld = Infinity
    let nextServed = Infinity
    for (const tenant of this.waiting.keys()) {
      if ((this.running.get(tenant) ?? 0) >= this.perTenant) continue
      // Behind by at most MAX_LAG_MS: time it did not use is not kept for it beyond that.
      const held = Math.max(this.held.get(tenant)!, floor)
      this.held.set(tenant, held)
      const served = this.lastServed.get(tenant) ?? 0
      if (held < nextHeld || (held === nextHeld && served < nextServed)) [next, nextHeld, nextServed] = [tenant, held, served]
    }
    if (next === undefined) return
    const line = this.waiting.get(next)!
    const waiter = line.shift()!
    if (line.length === 0) this.waiting.delete(next)
    waiter.admit()
  }

  /** A tenant with nothing running or waiting is not remembered (it competes for nothing). */
  private forgetIdle(tenant: string): void {
    if (this.running.has(tenant) || this.waiting.has(tenant)) return
    this.lastServed.delete(tenant)
    this.held.delete(tenant)
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
