/**
 * Credentials (a token with its organization and that one's parent) kept between requests in
 * database mode, without ever answering for one that a committed revocation or suspension has
 * changed, on any instance (docs/storage.md, "Credentials").
 *
 * The database counts such changes: every update or delete of a token or an organization advances
 * `credential_generation` in its own transaction (migration 3). A credential is remembered with the
 * generation it was read at, and used for a request only once a read of the generation that began
 * after the request arrived finds that same generation: then no change of a credential committed
 * between the two, so the remembered one is what the database held when the request had already
 * arrived. A newer generation forgets every remembered credential; so does an older one found by
 * such a read (the counter set back: a restore, a failover that lost commits).
 *
 * One read of the generation serves every request that arrived before it began: under load one
 * such read per round trip replaces a credential read per request (docs/storage.md, "Round trips").
 */
import type { Credential } from '../storage'

export class CredentialCache {
  private readonly remembered = new Map<string, Credential>()
  /** The generation every remembered credential was read at (-1 before the first). */
  private generation = -1
  /** The generation read in flight, and the one queued to begin after it. */
  private running: Promise<number> | undefined
  private queued: Promise<number> | undefined

  constructor(
    /** Reads the generation in a statement of its own (one at a time: see `laterGeneration`). */
    private readonly readGeneration: () => Promise<number>,
    /** Credentials remembered at most; past it the oldest is forgotten. */
    private readonly maxEntries = 10_000,
  ) {}

  /**
   * The credential of `tokenId` as the database holds it now, if it is remembered and still of
   * the current generation; undefined when the caller must read it (then `remember` it).
   */
  async current(tokenId: string): Promise<Credential | undefined> {
    if (!this.remembered.has(tokenId)) return undefined
    this.confirm(await this.laterGeneration())
    // Still there only if the generation read began after this call and found the one it was read at.
    return this.remembered.get(tokenId)
  }

  /** Keeps `credential`, read in one statement with `generation` (NaN: the counter could not be read). */
  remember(tokenId: string, credential: Credential, generation: number): void {
    // Nothing remembered: any generation may be taken, every use waits for a read that confirms it.
    // (Else, after the counter was set back, nothing would be kept until it passed the old value.)
    if (this.remembered.size === 0 && !Number.isNaN(generation)) this.generation = generation
    this.learn(generation)
    // Read before a change that another read has already shown, or with no counter to confirm it by: not kept.
    if (Number.isNaN(generation) || generation < this.generation) return
    this.remembered.delete(tokenId)
    this.remembered.set(tokenId, credential)
    if (this.remembered.size > this.maxEntries) this.remembered.delete(this.remembered.keys().next().value!)
  }

  /** How many credentials are remembered (tests). */
  get size(): number {
    return this.remembered.size
  }

  /**
   * A generation read begun after a request arrived: anything remembered at another generation is
   * forgotten, an older one too. The counter only grows, but a database restored from a dump, or a
   * standby promoted after it lost commits, sets it back, and what an instance remembers from
   * before may then have been revoked since (docs/storage.md, "Credentials").
   */
  private confirm(generation: number): void {
    if (generation === this.generation) return
    this.remembered.clear()
    this.generation = generation
  }

  /** A generation read with a credential: a newer one forgets every remembered credential. */
  private learn(generation: number): void {
    // No counter (its row deleted by hand): nothing remembered can be confirmed, so nothing is kept.
    if (Number.isNaN(generation)) return this.remembered.clear()
    if (generation <= this.generation) return
    this.remembered.clear()
    this.generation = generation
  }

  /**
   * The generation from a read that begins after this call: a new read when none is in flight;
   * else the one queued behind it, shared by every caller that arrives meanwhile.
   */
  private laterGeneration(): Promise<number> {
    if (this.running === undefined) return this.startRead()
    const startQueued = () => {
      this.queued = undefined
      return this.startRead()
    }
    return (this.queued ??= this.running.then(startQueued, startQueued))
  }

  private startRead(): Promise<number> {
    const read = this.readGeneration()
    this.running = read
    const finished = () => {
      if (this.running === read) this.running = undefined
    }
    read.then(finished, finished)
    return read
  }
}
