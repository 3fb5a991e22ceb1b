/**
 * The credentials database mode remembers between requests (docs/storage.md, "Credentials"): one
 * is used only after a generation read that began after the request arrived found the generation
 * it was read at; reads are shared by the requests that arrive while one runs. The database side
 * (every change of a token or an organization advances the generation) is in
 * test/unit/postgres-tokens.test.ts.
 */
import { describe, expect, test } from 'bun:test'
import { CredentialCache } from '../../src/storage/postgres/credentials'
import type { Credential } from '../../src/storage/storage'

/** Generation reads the test answers by hand, in the order they began. */
function generationReads() {
  const pending: { resolve: (generation: number) => void; reject: (error: Error) => void }[] = []
  const read = () => new Promise<number>((resolve, reject) => void pending.push({ resolve, reject }))
  return { read, pending, begun: () => pending.length }
}

const credential = (tokenId: string) => ({ token: { token_id: tokenId } }) as unknown as Credential

/** A cache that remembers `ids`, read at `generation`, and the generation reads it will make. */
function remembering(generation: number, ids = ['t1']) {
  const reads = generationReads()
  const cache = new CredentialCache(reads.read)
  for (const id of ids) cache.remember(id, credential(id), generation)
  return { reads, cache }
}

/** Settles what is ready (promise callbacks), so that an unresolved call is seen as such. */
const settle = () => new Promise((resolve) => setImmediate(resolve))

/** A promise's outcome so far. */
function watch<T>(promise: Promise<T>) {
  const state: { done: boolean; value?: T; error?: unknown } = { done: false }
  promise.then(
    (value) => Object.assign(state, { done: true, value }),
    (error) => Object.assign(state, { done: true, error }),
  )
  return state
}

describe('CredentialCache', () => {
  test('nothing remembered: no generation read, the caller reads the credential', async () => {
    const reads = generationReads()
    const cache = new CredentialCache(reads.read)
    expect(await cache.current('t1')).toBeUndefined()
    expect(reads.begun()).toBe(0)
  })

  test('a remembered credential is answered once a read begun after the call finds its generation', async () => {
    const { reads, cache } = remembering(5)
    const answer = watch(cache.current('t1'))
    await settle()
    expect(answer.done).toBe(false)
    expect(reads.begun()).toBe(1)
    reads.pending[0]!.resolve(5)
    await settle()
    expect(answer.value).toEqual(credential('t1'))
  })

  test('a read already running when a request arrives does not confirm it: the next one, begun after, does', async () => {
    const { reads, cache } = remembering(5)
    const first = watch(cache.current('t1'))
    const second = watch(cache.current('t1'))
    await settle()
    expect(reads.begun()).toBe(1)
    // The first read began before the second request: it answers the first one only. A revocation
    // committed in between shows in the second read's generation.
    reads.pending[0]!.resolve(5)
    await settle()
    expect(first.value).toEqual(credential('t1'))
    expect(second.done).toBe(false)
    expect(reads.begun()).toBe(2)
    reads.pending[1]!.resolve(6)
    await settle()
    expect(second).toEqual({ done: true, value: undefined })
    expect(cache.size).toBe(0)
  })

  test('every request that arrives while a read runs shares the one queued behind it', async () => {
    const { reads, cache } = remembering(1, Array.from({ length: 10 }, (_, i) => `t${i}`))
    const first = cache.current('t0')
    const waiting = Array.from({ length: 200 }, (_, i) => cache.current(`t${i % 10}`))
    await settle()
    expect(reads.begun()).toBe(1)
    reads.pending[0]!.resolve(1)
    await first
    await settle()
    expect(reads.begun()).toBe(2)
    reads.pending[1]!.resolve(1)
    expect((await Promise.all(waiting)).map((c) => c?.token.token_id)).toEqual(Array.from({ length: 200 }, (_, i) => `t${i % 10}`))
    expect(reads.begun()).toBe(2)
  })

  test('a newer generation forgets every credential; one read at an older generation than seen is not kept', async () => {
    const reads = generationReads()
    const cache = new CredentialCache(reads.read)
    cache.remember('t1', credential('t1'), 3)
    cache.remember('t2', credential('t2'), 4)
    expect(cache.size).toBe(1) // t1 was read before a change that t2's read saw
    cache.remember('t3', credential('t3'), 3)
    expect(cache.size).toBe(1)
    const answer = cache.current('t2')
    reads.pending[0]!.resolve(4)
    expect(await answer).toEqual(credential('t2'))
  })

  test('a generation read that finds an older generation (the counter set back) forgets every credential', async () => {
    const { reads, cache } = remembering(7, ['t1', 't2'])
    const answer = cache.current('t1')
    reads.pending[0]!.resolve(2)
    expect(await answer).toBeUndefined()
    expect(cache.size).toBe(0)
    // Read again at the generation found, it is kept and confirmed as before.
    cache.remember('t1', credential('t1'), 2)
    const again = cache.current('t1')
    await settle()
    reads.pending[1]!.resolve(2)
    expect(await again).toEqual(credential('t1'))
  })

  test('with nothing remembered, a credential read at an older generation than seen is kept (the counter was set back)', async () => {
    const { reads, cache } = remembering(7)
    const cleared = cache.current('t1')
    reads.pending[0]!.resolve(9)
    expect(await cleared).toBeUndefined()
    expect(cache.size).toBe(0)
    // Set back to 3 with nothing remembered: read there, it is kept, and confirmed by a read finding 3.
    cache.remember('t1', credential('t1'), 3)
    expect(cache.size).toBe(1)
    const answer = cache.current('t1')
    await settle()
    reads.pending[1]!.resolve(3)
    expect(await answer).toEqual(credential('t1'))
  })

  test('a failed generation read fails the requests waiting for it, and the next request reads again', async () => {
    const { reads, cache } = remembering(1)
    const failed = cache.current('t1')
    reads.pending[0]!.reject(new Error('database unavailable'))
    await expect(failed).rejects.toThrow('database unavailable')
    await settle()
    const next = cache.current('t1')
    expect(reads.begun()).toBe(2)
    reads.pending[1]!.resolve(1)
    expect(await next).toEqual(credential('t1'))
  })

  test('no counter (NaN: its row deleted by hand): nothing is kept or answered from memory', async () => {
    const { reads, cache } = remembering(2)
    const answer = cache.current('t1')
    reads.pending[0]!.resolve(NaN)
    expect(await answer).toBeUndefined()
    cache.remember('t1', credential('t1'), NaN)
    expect(cache.size).toBe(0)
  })

  test('bounded: past its size the oldest credential is forgotten', () => {
    const cache = new CredentialCache(generationReads().read, 3)
    for (const id of ['a', 'b', 'c', 'd']) cache.remember(id, credential(id), 1)
    expect(cache.size).toBe(3)
  })
})
