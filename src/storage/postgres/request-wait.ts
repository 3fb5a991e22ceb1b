/**
 * One request's wait for the database (docs/storage.md, "A database that does not answer"): every
 * read and transaction that a request makes shares one `--database-timeout`, counted over the time
 * spent waiting for the database (not for the client's body). Without it each step had a timeout
 * of its own, and a database answering each step just in time held a request for several.
 *
 * The wait travels with the request's asynchronous work (AsyncLocalStorage) from
 * `PostgresStorage.requestScope`, which the app wraps around every request's handler (src/app.ts).
 * The CLI's commands and background work run outside any request: each of their steps gets the
 * whole timeout. Steps a request runs side by side (a list's id filters, looked up together) are
 * charged once for the time they overlap: charged each, a list with three id filters was 503 after
 * waiting half its timeout (found in review, 2026-11-30).
 *
 * It carries the request's tenant too, once its token is known (`actFor`): its transactions (and
 * lists without a slice) take their turns at the connections as that tenant's (connection-turns.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { DatabaseUnavailableError } from './errors'

interface RequestWait {
  /** Time waited by steps that have ended, counted once where they overlapped. */
  waitedMs: number
  /** Steps under way, and since when at least one has been (`performance.now()`). */
  active: number
  since: number
  /** Whose request this is, once its token is known (docs/storage.md, "Turns at the connections"). */
  tenant: string | undefined
}

const requestWaits = new AsyncLocalStorage<RequestWait>()

/** Runs `handle` (one request) with a wait of its own, none of it used yet. */
export function withRequestWait<T>(handle: () => T): T {
  return requestWaits.run({ waitedMs: 0, active: 0, since: 0, tenant: undefined }, handle)
}

/** The running request acts for `tenant` from here on. */
export function actFor(tenant: string): void {
  const wait = requestWaits.getStore()
  if (wait !== undefined) wait.tenant = tenant
}

/** The tenant the running request acts for; undefined before its token is known, and outside any request. */
export function requestTenant(): string | undefined {
  return requestWaits.getStore()?.tenant
}

/**
 * Runs `step`, given how long it may wait for the database: what the running request has left of
 * `timeoutMs` (all of it outside a request); the time it took is charged to the request. A request
 * with nothing left is DatabaseUnavailableError at once, and its step never starts.
 */
export async function waitedFor<T>(timeoutMs: number, step: (ms: number) => Promise<T>): Promise<T> {
  const wait = requestWaits.getStore()
  if (wait === undefined) return step(timeoutMs)
  const now = performance.now()
  const left = timeoutMs - wait.waitedMs - (wait.active > 0 ? now - wait.since : 0)
  if (left <= 0) throw new DatabaseUnavailableError(new Error(`the request has waited its ${timeoutMs} ms (--database-timeout) for the database`), 'the database did not answer in time')
  if (wait.active++ === 0) wait.since = now
  try {
    return await step(left)
  } finally {
    if (--wait.active === 0) wait.waitedMs += performance.now() - wait.since
  }
}

/**
 * `work`'s outcome, or DatabaseUnavailableError if it has none after `ms`: a database that accepts
 * connections but does not answer (hung, or a network that drops its packets) is a 503 in bounded
 * time, not a request that waits as long as the TCP connection lives. `late` runs at the deadline.
 */
export function answeredWithin<T>(work: Promise<T>, ms: number, late?: () => void): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      late?.()
      reject(new DatabaseUnavailableError(new Error(`no answer within ${Math.round(ms)} ms (--database-timeout): a slow statement, a lock held, or a database that cannot be reached`), 'the database did not answer in time'))
    }, ms)
  })
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer))
}
