/**
 * The list connections' turns (docs/storage.md, "Plans"): a list runs only with one of the `slots`
 * (one per list connection), and tenants share them. A tenant holds at most all but one at once (of
 * a single one, all: then the tenants only take turns for it), so
 * another tenant's list finds one free or waits for the next to come free, never behind a queue of
 * the first tenant's; waiting lists go in turn per tenant, each tenant's in order. Without this the
 * pool served lists first come, first served: a tenant's slow text searches on eight connections
 * held a small tenant's page 33 times longer.
 */
import { DatabaseUnavailableError } from './errors'

/** A list let in with less time than this left is not sent: it would run on after its caller was answered 503. */
const MIN_TIME_LEFT_MS = 50

interface Waiter {
  readonly admit: () => void
  readonly timer: ReturnType<typeof setTimeout>
}

export class ListSlots {
  private free: number
  private readonly perTenant: number
  /** Lists running, by tenant. */
  private readonly running = new Map<string, number>()
  /** Lists waiting, by tenant, the tenants in the order they take turns (a Map keeps insertion order). */
  private readonly waiting = new Map<string, Waiter[]>()

  constructor(slots: number) {
    this.free = slots
    this.perTenant = Math.max(1, slots - 1)
  }

  /**
   * Runs `list` once `tenant` has a slot, and holds the slot until `list` is done (its connection is
   * busy until then, answered or not). DatabaseUnavailableError, and `list` never runs, if no slot
   * came before `deadline` (a `performance.now()` time) or too little time is left by then to answer.
   */
  async run<T>(tenant: string, deadline: number, list: () => Promise<T>): Promise<T> {
    await this.acquire(tenant, deadline - performance.now())
    try {
      if (deadline - performance.now() < MIN_TIME_LEFT_MS) throw new DatabaseUnavailableError(new Error('no list connection free in time'))
      return await list()
    } finally {
      this.release(tenant)
    }
  }

  private acquire(tenant: string, ms: number): Promise<void> | void {
    if (this.free > 0 && (this.running.get(tenant) ?? 0) < this.perTenant && !this.waiting.has(tenant)) return this.take(tenant)
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          clearTimeout(waiter.timer)
          this.take(tenant)
          resolve()
        },
        timer: setTimeout(() => {
          this.forget(tenant, waiter)
          reject(new DatabaseUnavailableError(new Error('no list connection free in time')))
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
  }

  private release(tenant: string): void {
    this.free++
    const left = this.running.get(tenant)! - 1
    if (left === 0) this.running.delete(tenant)
    else this.running.set(tenant, left)
    this.admitNext()
  }

  /** The first waiting tenant that may take a slot now goes on, then to the back of the turns. */
  private admitNext(): void {
    if (this.free === 0) return
    for (const [tenant, line] of this.waiting) {
      if ((this.running.get(tenant) ?? 0) >= this.perTenant) continue
      this.waiting.delete(tenant)
      const waiter = line.shift()!
      if (line.length > 0) this.waiting.set(tenant, line)
      waiter.admit()
      return
    }
  }

  private forget(tenant: string, waiter: Waiter): void {
    const line = this.waiting.get(tenant)
    if (!line) return
    const at = line.indexOf(waiter)
    if (at !== -1) line.splice(at, 1)
    if (line.length === 0) this.waiting.delete(tenant)
  }

  /** For tests: lists running and waiting. */
  get counts(): { readonly running: number; readonly waiting: number } {
    let waiting = 0
    for (const line of this.waiting.values()) waiting += line.length
    let running = 0
    for (const count of this.running.values()) running += count
    return { running, waiting }
  }
}
