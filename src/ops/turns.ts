/**
 * Long work of a request (big answers, walks over many records) in slices of about TURN_BUDGET_MS,
 * taking turns on the event loop by tenant, so that no request holds the others up for longer
 * than a slice (docs/security.md, "Big answers").
 */
import type { Maybe } from '../storage/storage'

/** How long one turn of the event loop may spend on `mapInTurns` before giving the loop back. */
export const TURN_BUDGET_MS = 1

/**
 * Long tasks waiting to go on (`nextTurn`), by tenant: the tenants in the order they take turns (a
 * Map keeps the order of insertion), each with its tasks (their slices, and what resumes them),
 * first in line first. Whether a turn is booked for the next; and the slice the last turn went on.
 */
const waitingTenants = new Map<string, { readonly slice: Slice; readonly resume: () => void }[]>()
let turnBooked = false
let resumed: Slice | undefined

function goOn(): void {
  turnBooked = false
  for (const [tenant, tasks] of waitingTenants) {
    waitingTenants.delete(tenant)
    const task = tasks.shift()!
    // The tenant's other tasks wait behind every other tenant's next one.
    if (tasks.length > 0) waitingTenants.set(tenant, tasks)
    resumed = task.slice
    // Its slice of this turn begins: a stage after the one that waited (a walk, then its answer)
    // goes on within it instead of waiting in line again.
    task.slice.endsAt = performance.now() + TURN_BUDGET_MS
    task.resume()
    break
  }
  if (waitingTenants.size > 0) bookTurn()
}

function bookTurn(): void {
  if (turnBooked) return
  turnBooked = true
  setImmediate(goOn)
}

/**
 * Gives the event loop back; resolves when it is this task's turn to go on. The long tasks of
 * requests (big answers, walks over many records) wait in one line and go on one per turn of the
 * loop, each for a slice of about TURN_BUDGET_MS, so that another request waits for one slice,
 * however many of them run at once (docs/security.md, "Big answers"). Tenants take turns: a
 * tenant's next task goes on after every other tenant's waiting one, so a tenant with many long
 * requests in flight slows another tenant's long request as one with a single request would (its
 * share of the loop is one in the number of tenants waiting, not one in the number of tasks).
 * Within a tenant, the task that went on last goes on again first, until it is done: a tenant's
 * tasks are finished one after the other rather than all advanced together, so that what they hold
 * while unfinished (megabytes of texts and bytes each) is one task's, not all of them (one token's
 * 32 big audit pages at once got the server killed in 1 GiB). The
 * price is the tenant's own: its short answer waits for the long ones it already has under way
 * (their turns, never another tenant's); letting every task's first turns go first instead cost
 * the memory back (docs/security.md, "Big answers"). The stages of one request share its slice
 * (`Slice`: a page's decoding, its texts, its bytes). A task's first slice runs at once only when
 * none is waiting (`mapInTurns`): when each new request's first slice ran at once, a tenant with
 * fifty big pages in flight held another tenant's reads by id behind the slices of every request
 * that arrived in that turn of the loop (p50 70 ms against 2.5 ms with one in flight; waiting in
 * line: 4.7 ms. Review, 2026-11-30).
 */
export function nextTurn(slice: Slice): Promise<void> {
  return new Promise<void>((resolve) => {
    let tasks = waitingTenants.get(slice.tenant)
    if (!tasks) waitingTenants.set(slice.tenant, (tasks = []))
    const task = { slice, resume: resolve }
    if (slice === resumed) tasks.unshift(task)
    else tasks.push(task)
    bookTurn()
  })
}

/**
 * One request's share of the event loop, which the stages of its long work share (`mapInTurns`,
 * list walks): `tenant`, whose turn it waits for (`nextTurn`); `endsAt`, when the slice of the
 * current turn is spent, so that a stage starting where the previous one ended, in the same turn
 * (a page's decoding, then its texts, then their bytes), goes on within what is left of it instead
 * of taking a slice of its own. 0: not started.
 */
export interface Slice {
  endsAt: number
  readonly tenant: string
}

/** Work of no tenant's request (the CLI, tests) waits in line as this one. */
export const NO_TENANT = ''

export const newSlice = (tenant: string = NO_TENANT): Slice => ({ endsAt: 0, tenant })

/**
 * `items.map(each)`, giving the event loop back whenever a turn has spent TURN_BUDGET_MS on it: a
 * page of big records (a thousand audit events of escaped text are 10 MB of JSON, some 100 ms to
 * build) never holds other requests up for longer than that (docs/security.md, "Big answers").
 * Synchronous, at the cost of a clock read every 16 items, for whatever fits in one turn. `slice`:
 * the task's, when this is one stage of several (a stage started once the slice is spent waits
 * for the task's next turn).
 */
export function mapInTurns<T, R>(items: readonly T[], each: (item: T) => R, slice: Slice = newSlice()): Maybe<R[]> {
  const mapped: R[] = new Array<R>(items.length)
  let next = 0
  const turn = (): boolean => {
    while (next < items.length) {
      mapped[next] = each(items[next]!)
      next++
      if ((next & 15) === 0 && next < items.length && performance.now() > slice.endsAt) return false
    }
    return true
  }
  const started = performance.now()
  // A task's first slice goes at once only when no task waits for a turn; else it waits in line
  // too (`nextTurn`): arrivals each run at once held another tenant's read behind as many slices.
  if (slice.endsAt === 0 && waitingTenants.size === 0) slice.endsAt = started + TURN_BUDGET_MS
  if (started < slice.endsAt && turn()) return mapped
  return (async () => {
    do {
      await nextTurn(slice)
      slice.endsAt = performance.now() + TURN_BUDGET_MS
    } while (!turn())
    return mapped
  })()
}
