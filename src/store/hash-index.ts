/**
 * The audit table's hash indexes (docs/storage.md "Audit events in memory"): sequence numbers found
 * by the encoded bytes of a key of their events (an event id; a target; a customer and a target),
 * held in typed arrays, so a million events cost the collector nothing to trace.
 */

/** A key's bytes in a buffer: one range, and for a composite key a second one of the same buffer. */
export interface KeySpan {
  bytes: Uint8Array
  start: number
  end: number
  /** Empty (`start2 === end2`) for a key of one value. */
  start2: number
  end2: number
}

export const newSpan = (): KeySpan => ({ bytes: new Uint8Array(0), start: 0, end: 0, start2: 0, end2: 0 })
export const spanOf = (bytes: Uint8Array): KeySpan => ({ bytes, start: 0, end: bytes.length, start2: 0, end2: 0 })


/** FNV-1a over both ranges, then a final mix: FNV's low bits (the ones a table's mask keeps) barely depend on the high bits of each byte. */
function hashKey(key: KeySpan): number {
  const bytes = key.bytes
  let hash = 0x811c9dc5
  for (let i = key.start; i < key.end; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193)
  for (let i = key.start2; i < key.end2; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193)
  hash ^= hash >>> 16
  hash = Math.imul(hash, 0x85ebca6b)
  hash ^= hash >>> 13
  hash = Math.imul(hash, 0xc2b2ae35)
  hash ^= hash >>> 16
  return hash >>> 0
}

function sameBytes(a: Uint8Array, aStart: number, aEnd: number, b: Uint8Array, bStart: number, bEnd: number): boolean {
  if (aEnd - aStart !== bEnd - bStart) return false
  for (let i = 0; i < aEnd - aStart; i++) if (a[aStart + i] !== b[bStart + i]) return false
  return true
}

function sameKey(a: KeySpan, b: KeySpan): boolean {
  return sameBytes(a.bytes, a.start, a.end, b.bytes, b.start, b.end) && sameBytes(a.bytes, a.start2, a.end2, b.bytes, b.start2, b.end2)
}

/**
 * Sequence numbers by the encoded bytes of a key of theirs: open addressing, linear probing, at most
 * 70% full, removal by shifting back (no tombstones). Each slot keeps its key's hash too, so a probe
 * reads an event's bytes only when the hashes agree, and growing never reads them (random reads into
 * the buffers were most of a start-up's time). With `counted`, an entry also counts how many events
 * share its key, and holds the newest of them.
 */
export class HashIndex {
  /** seq + 1; 0 is empty. */
  private slots = new Int32Array(1024)
  private hashes = new Int32Array(1024)
  private counts: Int32Array | null
  private entries = 0
  /** Spans filled in place (no allocation per probe): the key being placed or removed, and an entry's, to compare. */
  private readonly mine = newSpan()
  private readonly other = newSpan()

  constructor(
    private readonly keyAt: (seq: number, into: KeySpan) => KeySpan,
    counted: boolean,
  ) {
    this.counts = counted ? new Int32Array(1024) : null
  }

  get bytes(): number {
    return this.slots.byteLength + this.hashes.byteLength + (this.counts?.byteLength ?? 0)
  }

  /** The seq under the key, or -1. */
  find(key: KeySpan): number {
    const at = this.slotOf(key)
    return at === -1 ? -1 : this.slots[at]! - 1
  }

  countOf(key: KeySpan): number {
    const at = this.slotOf(key)
    return at === -1 ? 0 : this.counts![at]!
  }

  /** Adds `seq` unless an entry has its key already (false then: nothing changed). */
  insertIfAbsent(seq: number): boolean {
    return this.probeOrInsert(seq) === -1
  }

  /** Counted: `seq` becomes the newest under its key; returns the one it replaces (-1: none). */
  addNewest(seq: number): number {
    const at = this.probeOrInsert(seq)
    if (at === -1) return -1
    const previous = this.slots[at]! - 1
    this.slots[at] = seq + 1
    this.counts![at]!++
    return previous
  }

  /** One probe: the slot of an entry with `seq`'s key, or -1 after putting `seq` in the empty slot that ended the probe. */
  private probeOrInsert(seq: number): number {
    this.growIfFull()
    const key = this.keyAt(seq, this.mine)
    const hash = hashKey(key) | 0
    const mask = this.slots.length - 1
    let at = hash & mask
    for (;;) {
      const entry = this.slots[at]!
      if (entry === 0) {
        this.slots[at] = seq + 1
        this.hashes[at] = hash
        if (this.counts) this.counts[at] = 1
        this.entries++
        return -1
      }
      if (this.hashes[at] === hash && sameKey(this.keyAt(entry - 1, this.other), key)) return at
      at = (at + 1) & mask
    }
  }

  /** Removes the entry holding `seq` (uncounted: its key is `seq`'s own). */
  remove(seq: number): void {
    const at = this.slotOf(this.keyAt(seq, this.mine))
    if (at !== -1) this.clear(at)
  }

  /**
   * Counted: one event under the key is gone. `previous`: the key's newest becomes this one (the
   * newest was removed); -1: the oldest was removed, and the newest stays.
   */
  drop(key: KeySpan, previous: number): void {
    const at = this.slotOf(key)
    if (at === -1) return
    if (--this.counts![at]! === 0) this.clear(at)
    else if (previous !== -1) this.slots[at] = previous + 1
  }

  private slotOf(key: KeySpan): number {
    const hash = hashKey(key) | 0
    const mask = this.slots.length - 1
    let at = hash & mask
    for (;;) {
      const entry = this.slots[at]!
      if (entry === 0) return -1
      if (this.hashes[at] === hash && sameKey(this.keyAt(entry - 1, this.other), key)) return at
      at = (at + 1) & mask
    }
  }

  /** Empties slot `at`, moving back later entries of its probe run that would otherwise be lost. */
  private clear(at: number): void {
    const mask = this.slots.length - 1
    this.entries--
    let hole = at
    let next = (at + 1) & mask
    for (;;) {
      const entry = this.slots[next]!
      if (entry === 0) break
      const home = this.hashes[next]! & mask
      // The entry may move into the hole when its home is not cyclically within (hole, next].
      if (hole <= next ? home <= hole || home > next : home <= hole && home > next) {
        this.slots[hole] = entry
        this.hashes[hole] = this.hashes[next]!
        if (this.counts) this.counts[hole] = this.counts[next]!
        hole = next
      }
      next = (next + 1) & mask
    }
    this.slots[hole] = 0
    if (this.counts) this.counts[hole] = 0
  }

  private growIfFull(): void {
    if ((this.entries + 1) * 10 <= this.slots.length * 7) return
    const [old, oldHashes, oldCounts] = [this.slots, this.hashes, this.counts]
    this.slots = new Int32Array(old.length * 2)
    this.hashes = new Int32Array(old.length * 2)
    this.counts = oldCounts ? new Int32Array(old.length * 2) : null
    const mask = this.slots.length - 1
    for (let i = 0; i < old.length; i++) {
      const entry = old[i]!
      if (entry === 0) continue
      const hash = oldHashes[i]!
      let at = hash & mask
      while (this.slots[at] !== 0) at = (at + 1) & mask
      this.slots[at] = entry
      this.hashes[at] = hash
      if (this.counts) this.counts[at] = oldCounts![i]!
    }
  }
}
