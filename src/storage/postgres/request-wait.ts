/**
 * One request's wait for the database (docs/storage.md, "A database that does not answer"): every
 * read and transaction that a request makes shares one `--database-timeout`, counted over the time
 * spent waiting for the database (not for the client's body). Without it each step had a timeout
 * of its own, and a database answering each step just in time held a request for several.
 *
 * The wait travels with the request's asynchronous work (AsyncLocalStorage) from
 * `PostgresStorage.requestScope`, which the app wraps around every request's handler (src/app.ts).
 * The CLI's commands and background work run outside any request: each of their steps gets the
 * whole timeout. Steps a request runs side by side are each charged their own time, so the bound is
 * conservative: such a request gives up sooner, never later.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { DatabaseUnavailableError } from './errors'

interface RequestWait {
  waitedMs: number
}

const requestWaits = new AsyncLocalStorage<RequestWait>()

/** Runs `handle` (one request) with a wait of its own, none of it used yet. */
export function withRequestWait<T>(handle: () => T): T {
  return requestWaits.run({ waitedMs: 0 }, handle)
}

/**
 * Runs `step`, given how long it may wait for the database: what the running request has left of
 * `timeoutMs` (all of it outside a request); the time it took is charged to the request. A request
 * with nothing left is DatabaseUnavailableError at once, and its step never starts.
 */
export async function waitedFor<T>(timeoutMs: number, step: (ms: number) => Promise<T>): Promise<T> {
  const wait = requestWaits.getStore()
  if (wait === undefined) return step(timeoutMs)
  const left = timeoutMs - wait.waitedMs
  if (left <= 0) throw new DatabaseUnavailableError(new Error(`the request has waited ${timeoutMs} ms for the database`))
  const started = performance.now()
  try {
    return await step(left)
  } finally {
    wait.waitedMs += performance.now() - started
  }
}
