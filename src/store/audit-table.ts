/**
 * The audit events' table (docs/storage.md "Audit events in memory"). Events are written once and
 * only ever dropped from the oldest end (retention), so they are not kept as objects: each is a few
 * hundred bytes (audit-codec.ts) appended to 1 MiB buffers, addressed by a sequence number given in
 * creation order, and decoded only when read. Its indexes hold sequence numbers in typed arrays:
 *
 *   - by event id and by target: open-addressing hash tables keyed by the id's encoded bytes; a
 *     target's entry holds its newest event and its count, and each event links to the previous
 *     event of its target (a target has few events; they are found newest first);
 *   - by customer, by actor token, by both: a list of sequence numbers per key (few keys, long lists),
 *     in creation order, so a page of one is a slice.
 *
 * Live events are always the contiguous sequence numbers [base, end). The cases that would leave a
 * hole (a drop that is not the oldest events, the undo of a drop, a replaced event) never happen in
 * normal operation and rebuild the table instead, which renumbers it: `generation` then changes, and
 * a query that yielded in between starts again. The same table method set as `Table` (table.ts), so
 * the store, recovery and snapshots treat it alike.
 *
 * Within a buffer, consecutive events are back to back (bytes stored for an event that is then not
 * kept are taken back), so a snapshot writes a buffer's live events as one run of bytes, and loads
 * them back as a buffer (`capture`, `loadSnapshotLine`; docs/storage.md).
 */
import { AuditCodec, checkEvent, encodeKey, eventEnd, HEADER_INDEX, headerValue, newHeader, skipValue, T_UUID, type EventHeader } from './audit-codec'
import type { AuditEvent } from '../storage/records'
import { SnapshotLineError } from './snapshot-file'
import { GenerationalMap, type ChangeObserver } from './table'
import { HashIndex, newSpan, spanOf, type KeySpan } from './hash-index'

/** Size of one buffer of encoded events (an event larger than this gets a buffer of its own). */
const CHUNK_BYTES = 1 << 20
/** Positions are `chunk number × CHUNK_SPAN + offset`. */
const CHUNK_SPAN = 2 ** 32
/** Sequence numbers are kept in Int32Arrays: at this one the table is renumbered from 0. */
const DEFAULT_SEQUENCE_LIMIT = 2 ** 31 - 2
/** A snapshot line of the dictionary holds up to this many strings (and a line of events one buffer's). */
const STRINGS_PER_LINE = 4096

/** The list indexes, each keyed on header fields (a composite key joins them with `|`), like tables.ts's INDEX_FIELDS. */
export const AUDIT_LIST_INDEXES = {
  customer: ['customer_id'],
  actorToken: ['actor_token_id'],
  customerActorToken: ['customer_id', 'actor_token_id'],
  // The vendor's `actions` filter: without it, a walk of the whole table. Not by customer and
  // action: that gave each new customer a key, and a create of a customer cost a fifth more CPU
  // (A/B, 2026-11-30); a customer's filter on actions walks its own events.
  action: ['action'],
} as const satisfies Record<string, readonly string[]>
export type AuditListIndex = keyof typeof AUDIT_LIST_INDEXES

/** A growable list of sequence numbers, oldest first, with room to drop from the front. */
export class SequenceList {
  items = new Int32Array(4)
  start = 0
  length = 0

  push(seq: number): void {
    if (this.start + this.length === this.items.length) {
      if (this.start > this.items.length / 2) {
        this.items.copyWithin(0, this.start, this.start + this.length)
      } else {
        const larger = new Int32Array(this.items.length * 2)
        larger.set(this.items.subarray(this.start, this.start + this.length))
        this.items = larger
      }
      this.start = 0
    }
    this.items[this.start + this.length++] = seq
  }

  at(i: number): number {
    return this.items[this.start + i]!
  }

  /** A copy of the list (a query walks it while writes may append). */
  copy(): Int32Array {
    return this.items.slice(this.start, this.start + this.length)
  }
}

export class AuditEventTable {
  readonly name = 'audit_events'
  readonly codec = new AuditCodec()
  /** Never called: events do not change, and a snapshot reads an immutable view (`capture`). */
  observer: ChangeObserver<AuditEvent> | undefined
  /**
   * Changes when sequence numbers held may name other events: the table is renumbered (a rebuild),
   * or its newest event is taken back (an undo), whose number the next event gets. A query holding
   * numbers starts again.
   */
  generation = 0

  private chunks: Uint8Array[] = []
  private chunkFloor = 0
  private used = CHUNK_BYTES
  /**
   * Per sequence number from `floor`: the event's position, the previous event of its target, and
   * the previous event of its target and customer (-1: none).
   */
  private positions = new Float64Array(1024)
  private previousOfTarget = new Int32Array(1024)
  private previousOfCustomerTarget = new Int32Array(1024)
  private floor = 0
  private base = 0
  private end = 0
  private byId!: HashIndex
  private byTarget!: HashIndex
  /**
   * By customer and target: a customer's filter on targets reads its own events alone, so another
   * tenant's record with the same id, and its events, cost nothing and hide nothing (docs/security.md).
   */
  private byCustomerTarget!: HashIndex
  /** A key span to drop an event's keys with (unindex). */
  private readonly dropSpan = newSpan()
  /** Per list index, per key: the one event under it, or its list (a key with one event costs no array). */
  private lists!: Map<AuditListIndex, GenerationalMap<number | SequenceList>>
  private readonly header = newHeader()
  private readonly decodeHeader = newHeader()
  private readonly sequenceLimit: number

  constructor(options: { sequenceLimit?: number } = {}) {
    this.sequenceLimit = options.sequenceLimit ?? DEFAULT_SEQUENCE_LIMIT
    this.reset()
  }

  get size(): number {
    return this.end - this.base
  }

  keyOf(record: AuditEvent): string {
    return record.event_id
  }

  get(id: string): AuditEvent | undefined {
    const seq = this.seqOf(id)
    return seq === -1 ? undefined : this.decode(seq)
  }

  has(id: string): boolean {
    return this.seqOf(id) !== -1
  }

  /** Inserts an event; returns the previous version (undefined: events are never replaced in practice). */
  put(record: AuditEvent): AuditEvent | undefined {
    if (this.append(record)) return undefined
    // Never done by keyward (events are not changed): kept correct, not fast.
    const previous = this.get(record.event_id)
    this.rebuild(this.liveRecords().map((event) => (event.event_id === record.event_id ? record : event)))
    return previous
  }

  putStored(stored: Record<string, unknown>): void {
    this.put(stored as unknown as AuditEvent)
  }

  loadStored(stored: Record<string, unknown>): void {
    this.put(stored as unknown as AuditEvent)
  }

  /** Removes an event; only used to undo an insert whose log write failed, so it is the newest. */
  remove(id: string): void {
    const seq = this.seqOf(id)
    if (seq === -1) return
    if (seq !== this.end - 1) {
      this.rebuild(this.liveRecords().filter((event) => event.event_id !== id))
      return
    }
    this.unindex(seq, this.decode(seq), 'newest')
    this.end--
    // The next event gets this number: a query that yielded holding it would read that one (found by a fuzz, 2026-11-30).
    this.generation++
    // Its bytes were the last stored (append): taken back, so the buffer's events stay back to back.
    const position = this.positions[seq - this.floor]!
    const chunk = Math.floor(position / CHUNK_SPAN)
    if (chunk === this.chunkFloor + this.chunks.length - 1) this.used = position - chunk * CHUNK_SPAN
  }

  /** Removes the oldest `count` events and returns them, oldest first (retention). */
  removeOldest(count: number): AuditEvent[] {
    const removed: AuditEvent[] = []
    const n = Math.min(count, this.size)
    for (let i = 0; i < n; i++) {
      const seq = this.base
      const record = this.decode(seq)
      removed.push(record)
      this.unindex(seq, record, 'oldest')
      this.base++
    }
    this.releaseHead()
    return removed
  }

  /** Removes these events, given oldest first (the replay of a logged `removeOldest`). */
  removeIds(ids: readonly string[]): AuditEvent[] {
    const present = ids.filter((id) => this.has(id))
    if (present.every((id, i) => this.seqOf(id) === this.base + i)) return this.removeOldest(present.length)
    const gone = new Set(present)
    const removed: AuditEvent[] = []
    const kept: AuditEvent[] = []
    for (const event of this.liveRecords()) (gone.has(event.event_id) ? removed : kept).push(event)
    this.rebuild(kept)
    return removed
  }

  /** Undoes `removeOldest` (its log write failed): the events go back at the head, in order. */
  restoreOldest(records: readonly AuditEvent[]): void {
    this.rebuild([...records, ...this.liveRecords()])
  }

  /** Every event id in creation order (a copy; for tests and tools, it builds every id). */
  ids(): readonly string[] {
    const ids: string[] = []
    for (let seq = this.base; seq < this.end; seq++) ids.push(headerValue(this.codec, this.headerOf(seq), 0) as string)
    return ids
  }

  /** Ids under `key` in index `index` (`target` or a list index), in creation order (a copy). */
  idsBy(index: string, key: string): readonly string[] {
    const seqs = index === 'target' ? this.targetSequences(key) : Array.from(this.list(index as AuditListIndex, key)?.copy() ?? [])
    return seqs.map((seq) => headerValue(this.codec, this.headerOf(seq), 0) as string)
  }

  /** Events in creation order. */
  *values(): IterableIterator<AuditEvent> {
    for (let seq = this.base; seq < this.end; seq++) yield this.decode(seq)
  }

  /**
   * The events as they are now, read later (a snapshot written while writes go on): the positions
   * are copied and the buffers they point into are never written again below them, so neither
   * appends nor drops change what this holds. `leftOut`: ids of events it leaves out (their insert
   * is not durable yet).
   */
  capture(leftOut: ReadonlySet<string> = new Set()): CapturedAuditEvents {
    const leftOutAt: number[] = []
    for (const id of leftOut) {
      const seq = this.seqOf(id)
      if (seq !== -1) leftOutAt.push(seq - this.base)
    }
    leftOutAt.sort((a, b) => a - b)
    return new CapturedAuditEvents(
      this.codec,
      this.codec.dictionarySize,
      this.positions.slice(this.base - this.floor, this.end - this.floor),
      this.chunks.slice(),
      this.chunkFloor,
      leftOutAt,
    )
  }

  /**
   * Loads one line of a snapshot's encoded events (`CapturedAuditEvents.snapshotLines`): dictionary
   * entries, or a run of events, checked before anything of them is kept. Returns the newest
   * `created` or `modified` of the events loaded (0 for the dictionary). Rejects anything but what
   * a snapshot writes with a SnapshotLineError: a snapshot's damage, never events read wrong.
   */
  loadSnapshotLine(line: readonly unknown[]): number {
    const [kind, first, ...rest] = line
    if (kind === 'strings') {
      if (!this.codec.loadStrings(first as number, rest)) throw new SnapshotLineError('audit event dictionary entries out of order or repeated')
      return 0
    }
    const text = rest[0]
    if (kind !== 'events' || rest.length !== 1 || !Number.isSafeInteger(first) || (first as number) < 1 || typeof text !== 'string') {
      throw new SnapshotLineError('not a line of audit events')
    }
    return this.loadEncoded(strictBase64(text), first as number)
  }

  /** Takes `bytes`, exactly `count` encoded events back to back, as a buffer of its own (loadSnapshotLine). */
  private loadEncoded(bytes: Uint8Array, count: number): number {
    const starts = new Float64Array(count)
    const dictionarySize = this.codec.dictionarySize
    let at = 0
    for (let i = 0; i < count; i++) {
      starts[i] = at
      at = at < bytes.length ? checkEvent(bytes, at, bytes.length, dictionarySize) : -1
      if (at === -1) throw new SnapshotLineError(`audit events: event ${i + 1} of ${count} is not a whole, valid event`)
    }
    if (at !== bytes.length) throw new SnapshotLineError(`audit events: bytes left after ${count} events`)
    if (this.end + count > this.sequenceLimit) throw new RangeError(`more than ${this.sequenceLimit} audit events in memory`)
    this.chunks.push(bytes)
    this.used = bytes.length // appends go to a new buffer
    const chunkStart = (this.chunkFloor + this.chunks.length - 1) * CHUNK_SPAN
    const header = this.header
    const field = (name: string) => headerValue(this.codec, header, HEADER_INDEX[name]!)
    let newest = 0
    for (let i = 0; i < count; i++) {
      const seq = this.end
      if (seq - this.floor === this.positions.length) this.growSequences()
      this.positions[seq - this.floor] = chunkStart + starts[i]!
      this.codec.readHeader(bytes, starts[i]!, header)
      if (!this.addToIndexes(seq, field)) throw new SnapshotLineError(`audit events: event ${i + 1} of ${count} repeats the id of an earlier one`)
      newest = Math.max(newest, header.created, header.modified)
    }
    return newest
  }

  // -------------------------------------------------------------------------------------------
  // What the list queries read (src/storage/embedded/audit-query.ts)

  /** The live sequence numbers: [first, end). */
  get first(): number {
    return this.base
  }

  get last(): number {
    return this.end
  }

  /** The sequence number of the event with this id, or -1. */
  seqOf(id: string): number {
    return this.byId.find(spanOf(encodeKey(id)))
  }

  /** The events about `target`, oldest first. */
  targetSequences(target: string): number[] {
    return this.chain(this.byTarget.find(spanOf(encodeKey(target))), this.previousOfTarget)
  }

  /** How many events are about `target` (without walking them). */
  targetCount(target: string): number {
    return this.byTarget.countOf(spanOf(encodeKey(target)))
  }

  /** The events about `target` whose customer is `customer`, oldest first. */
  customerTargetSequences(customer: string, target: string): number[] {
    return this.chain(this.byCustomerTarget.find(this.customerTargetKey(customer, target)), this.previousOfCustomerTarget)
  }

  /** How many events about `target` are `customer`'s (without walking them). */
  customerTargetCount(customer: string, target: string): number {
    return this.byCustomerTarget.countOf(this.customerTargetKey(customer, target))
  }

  list(index: AuditListIndex, key: string): SequenceList | undefined {
    const entry = this.lists.get(index)!.get(key)
    if (typeof entry !== 'number') return entry
    const one = new SequenceList()
    one.push(entry)
    return one
  }

  /** The event's header into a shared object (valid until the next call). */
  headerOf(seq: number, header: EventHeader = this.header): EventHeader {
    const position = this.positions[seq - this.floor]!
    const chunk = Math.floor(position / CHUNK_SPAN)
    this.codec.readHeader(this.chunks[chunk - this.chunkFloor]!, position - chunk * CHUNK_SPAN, header)
    return header
  }

  createdOf(seq: number): number {
    return this.headerOf(seq).created
  }

  decode(seq: number): AuditEvent {
    const position = this.positions[seq - this.floor]!
    const chunk = Math.floor(position / CHUNK_SPAN)
    return this.codec.decode(this.chunks[chunk - this.chunkFloor]!, position - chunk * CHUNK_SPAN, this.decodeHeader) as unknown as AuditEvent
  }

  /** Bytes held by the encoded events and the indexes (not the dictionary): for tests that bound memory. */
  get bytesHeld(): number {
    let bytes = this.positions.byteLength + this.previousOfTarget.byteLength + this.previousOfCustomerTarget.byteLength
    bytes += this.byId.bytes + this.byTarget.bytes + this.byCustomerTarget.bytes
    for (const chunk of this.chunks) bytes += chunk.byteLength
    for (const lists of this.lists.values()) for (const list of lists.values()) if (typeof list !== 'number') bytes += list.items.byteLength
    return bytes
  }

  // -------------------------------------------------------------------------------------------

  /** Appends the event as the newest; false (nothing indexed) when its id is taken. */
  private append(record: AuditEvent): boolean {
    if (this.end >= this.sequenceLimit) {
      // Numbers are freed only by drops: a table this large without any cannot go on.
      if (this.base === 0) throw new RangeError(`more than ${this.sequenceLimit} audit events in memory`)
      this.rebuild(this.liveRecords())
    }
    const encoded = this.codec.encode(record as unknown as Record<string, unknown>)
    const seq = this.end
    if (seq - this.floor === this.positions.length) this.growSequences()
    const position = this.store(encoded)
    this.positions[seq - this.floor] = position
    if (this.addToIndexes(seq, (field) => record[field as keyof AuditEvent])) return true
    // Two records with one id (in data, or a caller's mistake): the bytes just stored are taken back.
    this.used -= encoded.length
    return false
  }

  /** Makes `seq`, stored at its position, the newest event; false (nothing changed) when its id is taken. */
  private addToIndexes(seq: number, field: (name: string) => unknown): boolean {
    if (!this.byId.insertIfAbsent(seq)) return false
    this.end++
    this.previousOfTarget[seq - this.floor] = this.byTarget.addNewest(seq)
    this.previousOfCustomerTarget[seq - this.floor] = this.byCustomerTarget.addNewest(seq)
    for (const [index, keys] of this.lists) {
      const key = listKey(field, index)
      if (key === null) continue
      const entry = keys.get(key)
      if (entry === undefined) keys.add(key, seq)
      else if (typeof entry === 'number') {
        const list = new SequenceList()
        list.push(entry)
        list.push(seq)
        keys.replace(key, list)
      } else entry.push(seq)
    }
    return true
  }

  /** Takes `seq` (the oldest or the newest live event) out of every index. */
  private unindex(seq: number, record: AuditEvent, which: 'oldest' | 'newest'): void {
    this.byId.remove(seq)
    const newest = which === 'newest'
    this.byTarget.drop(this.keySpanOf(seq, 'target', this.dropSpan), newest ? this.previousOfTarget[seq - this.floor]! : -1)
    this.byCustomerTarget.drop(this.keySpanOf(seq, 'customerTarget', this.dropSpan), newest ? this.previousOfCustomerTarget[seq - this.floor]! : -1)
    for (const [index, keys] of this.lists) {
      const key = listKey((field) => record[field as keyof AuditEvent], index)
      if (key === null) continue
      const list = keys.get(key)!
      if (typeof list === 'number') {
        keys.delete(key)
        continue
      }
      list.length--
      if (which === 'oldest') list.start++
      if (list.length === 0) keys.delete(key)
    }
  }

  /** Copies the encoded event into the current buffer (a new one when it is full); returns its position. */
  private store(encoded: Uint8Array): number {
    if (this.used + encoded.length > (this.chunks.at(-1)?.length ?? 0)) {
      this.chunks.push(new Uint8Array(Math.max(CHUNK_BYTES, encoded.length)))
      this.used = 0
    }
    const chunk = this.chunks[this.chunks.length - 1]!
    chunk.set(encoded, this.used)
    const position = (this.chunkFloor + this.chunks.length - 1) * CHUNK_SPAN + this.used
    this.used += encoded.length
    return position
  }

  /** After drops from the head: buffers holding only dropped events are let go, and the arrays' head space reused. */
  private releaseHead(): void {
    const firstChunk = this.base < this.end ? Math.floor(this.positions[this.base - this.floor]! / CHUNK_SPAN) : this.chunkFloor + this.chunks.length - 1
    if (firstChunk > this.chunkFloor) {
      this.chunks.splice(0, firstChunk - this.chunkFloor)
      this.chunkFloor = firstChunk
    }
    const dead = this.base - this.floor
    if (dead > 1024 && dead > this.positions.length / 2) {
      this.positions.copyWithin(0, dead, this.end - this.floor)
      this.previousOfTarget.copyWithin(0, dead, this.end - this.floor)
      this.previousOfCustomerTarget.copyWithin(0, dead, this.end - this.floor)
      this.floor = this.base
    }
  }

  private growSequences(): void {
    const dead = this.base - this.floor
    const live = this.end - this.base
    const capacity = dead > this.positions.length / 4 ? this.positions.length : this.positions.length * 2
    const positions = new Float64Array(capacity)
    positions.set(this.positions.subarray(dead, dead + live))
    const grown = (previous: Int32Array) => {
      const copy = new Int32Array(capacity)
      copy.set(previous.subarray(dead, dead + live))
      return copy
    }
    this.positions = positions
    this.previousOfTarget = grown(this.previousOfTarget)
    this.previousOfCustomerTarget = grown(this.previousOfCustomerTarget)
    this.floor = this.base
  }

  /** Every live event decoded, oldest first (the slow paths only). */
  private liveRecords(): AuditEvent[] {
    return [...this.values()]
  }

  /** Where `seq`'s key for an index lies in its buffer, into `span` (filled in place: no allocation per probe). */
  private keySpanOf(seq: number, which: 'id' | 'target' | 'customerTarget', span: KeySpan): KeySpan {
    const position = this.positions[seq - this.floor]!
    const chunk = Math.floor(position / CHUNK_SPAN)
    const bytes = this.chunks[chunk - this.chunkFloor]!
    const offset = position - chunk * CHUNK_SPAN
    span.bytes = bytes
    span.start2 = span.end2 = 0
    // A UUID (nearly every id) is 17 bytes: no need to read the value to know where it ends.
    const idEnd = bytes[offset] === T_UUID ? offset + 17 : skipValue(bytes, offset)
    if (which === 'id') {
      span.start = offset
      span.end = idEnd
      return span
    }
    span.start = idEnd
    span.end = bytes[idEnd] === T_UUID ? idEnd + 17 : skipValue(bytes, idEnd)
    if (which === 'customerTarget') {
      let at = span.end
      for (let i = 0; i < VALUES_FROM_TARGET_TO_CUSTOMER; i++) at = skipValue(bytes, at)
      span.start2 = at
      span.end2 = skipValue(bytes, at)
    }
    return span
  }

  /** A customer's and a target's key as the events hold them: the target's bytes, then the customer's. */
  private customerTargetKey(customer: string, target: string): KeySpan {
    const targetBytes = encodeKey(target)
    const customerBytes = this.codec.encodeHeaderValue(customer, true)
    const bytes = new Uint8Array(targetBytes.length + customerBytes.length)
    bytes.set(targetBytes)
    bytes.set(customerBytes, targetBytes.length)
    return { bytes, start: 0, end: targetBytes.length, start2: targetBytes.length, end2: bytes.length }
  }

  /** The live events of a chain from its newest, `seq`, oldest first. */
  private chain(seq: number, previous: Int32Array): number[] {
    const seqs: number[] = []
    while (seq >= this.base) {
      seqs.push(seq)
      seq = previous[seq - this.floor]!
    }
    return seqs.reverse()
  }

  /** Starts over with these events, numbered from 0. */
  private rebuild(records: readonly AuditEvent[]): void {
    this.reset()
    this.generation++
    for (const record of records) this.put(record)
  }

  private reset(): void {
    this.chunks = []
    this.chunkFloor = 0
    this.used = CHUNK_BYTES
    this.positions = new Float64Array(1024)
    this.previousOfTarget = new Int32Array(1024)
    this.previousOfCustomerTarget = new Int32Array(1024)
    this.floor = this.base = this.end = 0
    this.byId = new HashIndex((seq, span) => this.keySpanOf(seq, 'id', span), false)
    this.byTarget = new HashIndex((seq, span) => this.keySpanOf(seq, 'target', span), true)
    this.byCustomerTarget = new HashIndex((seq, span) => this.keySpanOf(seq, 'customerTarget', span), true)
    this.lists = new Map(Object.keys(AUDIT_LIST_INDEXES).map((index) => [index as AuditListIndex, new GenerationalMap()]))
  }
}


/** The bytes of base64 text exactly as `toBase64` writes it: padded, nothing else in it (not even the whitespace `fromBase64` skips). */
function strictBase64(text: string): Uint8Array {
  let bytes: Uint8Array | undefined
  try {
    bytes = Uint8Array.fromBase64(text, { lastChunkHandling: 'strict' })
  } catch {
    // refused below
  }
  const padding = text.endsWith('==') ? 2 : text.endsWith('=') ? 1 : 0
  if (!bytes || text.length % 4 !== 0 || bytes.length !== (text.length / 4) * 3 - padding) throw new SnapshotLineError('audit events: invalid base64')
  return bytes
}

/**
 * The live audit events at one moment (AuditEventTable.capture): the dictionary's size then, the
 * events' positions and the buffers holding them. A snapshot writes them as lines of a table
 * (docs/storage.md "Audit events in memory"):
 *
 *   ["strings",0,"enrollment.create","organization",...]   dictionary entries, from that index on
 *   ["events",1843,"BAAAbM6x..."]                           that many events, their bytes in base64
 *
 * the dictionary first (what the events' bytes refer to), then a line per buffer of live events.
 */
export class CapturedAuditEvents {
  constructor(
    private readonly codec: AuditCodec,
    private readonly dictionarySize: number,
    /** The captured events' positions, oldest first. */
    private readonly positions: Float64Array,
    private readonly chunks: readonly Uint8Array[],
    private readonly chunkFloor: number,
    /** Indexes into `positions` of the events left out, ascending. */
    private readonly leftOut: readonly number[],
  ) {}

  get size(): number {
    return this.positions.length - this.leftOut.length
  }

  /** The events decoded, oldest first. */
  *records(): IterableIterator<AuditEvent> {
    const header = newHeader()
    let skip = 0
    for (let i = 0; i < this.positions.length; i++) {
      if (this.leftOut[skip] === i) {
        skip++
        continue
      }
      const { bytes, offset } = this.locate(i)
      yield this.codec.decode(bytes, offset, header) as unknown as AuditEvent
    }
  }

  /**
   * The snapshot's lines: the dictionary, then `older` (events older than all of these, as records:
   * those dropped since by writes not yet durable), then the events' bytes, copied, not decoded.
   */
  *snapshotLines(older: Iterable<AuditEvent> = []): Iterable<unknown> {
    for (let from = 0; from < this.dictionarySize; from += STRINGS_PER_LINE) {
      const line: unknown[] = ['strings', from]
      for (let i = from; i < Math.min(from + STRINGS_PER_LINE, this.dictionarySize); i++) line.push(this.codec.stringAt(i))
      yield line
    }
    yield* older
    const count = this.positions.length
    let skip = 0
    for (let i = 0; i < count; ) {
      if (this.leftOut[skip] === i) {
        skip++
        i++
        continue
      }
      // A run: the events from i on in the same buffer, up to one left out.
      const { chunk, bytes, offset } = this.locate(i)
      const inChunk = (n: number) => n < count && Math.floor(this.positions[n]! / CHUNK_SPAN) === chunk
      let j = i + 1
      while (inChunk(j) && this.leftOut[skip] !== j) j++
      // Events of a buffer are back to back (see the top of this file): the run ends where the next one starts.
      const end = inChunk(j) ? this.locate(j).offset : eventEnd(bytes, this.locate(j - 1).offset)
      yield ['events', j - i, bytes.subarray(offset, end).toBase64()]
      i = j
    }
  }

  private locate(i: number): { chunk: number; bytes: Uint8Array; offset: number } {
    const position = this.positions[i]!
    const chunk = Math.floor(position / CHUNK_SPAN)
    return { chunk, bytes: this.chunks[chunk - this.chunkFloor]!, offset: position - chunk * CHUNK_SPAN }
  }
}

/** The key an event (its fields by name) is listed under in a list index; null when a field is null. */
function listKey(field: (name: string) => unknown, index: AuditListIndex): string | null {
  const fields = AUDIT_LIST_INDEXES[index]
  let key = ''
  for (let i = 0; i < fields.length; i++) {
    const value = field(fields[i]!)
    if (value === null || value === undefined) return null
    key = i === 0 ? String(value) : `${key}|${value}`
  }
  return key
}

/** The header values between an event's target and its customer: action, target type, the actor's four. */
const VALUES_FROM_TARGET_TO_CUSTOMER = HEADER_INDEX.customer_id! - HEADER_INDEX.target_id! - 1
