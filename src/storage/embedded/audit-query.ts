/**
 * List queries on audit events (docs/storage.md "Audit events in memory"), the planner's rules on
 * the events' own table (src/store/audit-table.ts): the most selective index condition drives
 * (event ids, targets, a customer's targets, or a list index: customer, actor token, both, or action), the
 * others test candidates on the event's header read in place, and only the page is decoded. A page of one index list, with or
 * without a range of `created` (two binary searches), is a slice. A walk over more than WALK_CHUNK
 * candidates yields between chunks, and starts again if the table was renumbered meanwhile.
 */
import { HEADER_INDEX, headerValue, UUID_BYTES, type EventHeader } from '../../store/audit-codec'
import { AUDIT_LIST_INDEXES, type AuditEventTable, type AuditListIndex, type SequenceList } from '../../store/audit-table'
import type { AuditEvent } from '../records'
import { then, type Condition, type ListQuery, type Maybe, type Page } from '../storage'
import { mapInTurns, nextTurn, newSlice } from '../../ops/turns'
import { firstInCreationOrder, plannerWork, WALK_CHUNK } from './planner'

/** Candidate sequence numbers: `ordered` when ascending (creation order). */
interface Candidates {
  readonly seqs: Seqs
  readonly ordered: boolean
}

interface Driver {
  readonly estimate: number
  /** `copy`: the caller will yield while walking them, so a live list must be copied. */
  readonly candidates: (copy: boolean) => Candidates
  /** The conditions it answers. */
  readonly answers: readonly Condition<'audit_events'>[]
}

type Test = (header: EventHeader, seq: number) => boolean

/**
 * The driver first: the fewest candidates, and of as few, the one that answers more conditions (a
 * customer's own token: its list by actor token and its list by customer and actor token hold the
 * same events, but only the second leaves nothing to test; taking the first walked every event of
 * the token for a page of 25: found in review, 2026-11-30).
 */
const byCost = (a: Driver, b: Driver) => a.estimate - b.estimate || b.answers.length - a.answers.length

export function listAuditEvents(table: AuditEventTable, query: ListQuery<'audit_events'>): Maybe<Page<AuditEvent>> {
  if (query.scope) throw new Error('audit events have no organization_id: scope them with a customer_id condition')
  // What the query reads from: events dropped by retention after this (the oldest `first` moves)
  // or a renumbering mean it starts again, whenever it waits (`decodedPage`, the walk's turns).
  const generation = table.generation
  const first = table.first
  const where = query.where
  const driver = driversOf(table, where).sort(byCost)[0]
  const rest = where.filter((condition) => !driver?.answers.includes(condition))
  const range = rest.find(isCreatedRange)
  const tests = rest.filter((condition) => condition !== range).map((condition) => testOf(table, condition))
  const paging = query.page ? { offset: (query.page.number - 1) * query.page.size, size: query.page.size } : { offset: 0, size: Infinity }
  const walking = tests.length > 0
  let source: Candidates = driver ? driver.candidates(walking) : { seqs: new SeqRange(table.first, table.last), ordered: true }
  let testRange = range
  if (range && source.ordered) {
    source = { seqs: withinCreated(table, source.seqs, range.from ?? -Infinity, range.until ?? Infinity), ordered: true }
    testRange = undefined
  }
  if (testRange) tests.push(rangeTest(testRange.from ?? -Infinity, testRange.until ?? Infinity))

  if (!walking && !testRange && source.ordered) {
    const seqs = source.seqs
    const page = slice(seqs.length, paging.offset, paging.size, query.order)
    plannerWork.recordsRead += page.length
    return decodedPage(table, query, { generation, first }, page.map((i) => seqs.at(i)), seqs.length)
  }
  const walk = new Walk(table, source, tests)
  // The request's slice, whose tenant the walk waits in line as (a walk of no request: a slice of its own).
  const turns = query.slice ?? newSlice()
  const finish = (): Maybe<Page<AuditEvent>> => {
    const matched = walk.matched
    if (!source.ordered) matched.sort((a, b) => a - b)
    return decodedPage(table, query, { generation, first }, slice(matched.length, paging.offset, paging.size, query.order).map((i) => matched[i]!), matched.length)
  }
  if (walk.step()) return finish()
  return (async () => {
    do {
      plannerWork.turnsYielded++
      await nextTurn(turns)
      // Retention dropped events the walk has matched or has still to read (their bytes may be
      // let go), or the table was renumbered (a rebuild, never in normal operation): again.
      if (table.generation !== generation || table.first !== first) return listAuditEvents(table, query)
    } while (!walk.step())
    return finish()
  })()
}

/**
 * The events of a page, decoded in turns of the event loop (`mapInTurns`: a page of big events is
 * megabytes of text, docs/security.md "Big answers"). Events created meanwhile are not in it, as in
 * a walk; if retention dropped any event since the query began (`read`: the page and its total may
 * have shifted, and a dropped event's bytes may be let go), or the table was renumbered, the query
 * runs again from the start.
 */
function decodedPage(
  table: AuditEventTable,
  query: ListQuery<'audit_events'>,
  read: { readonly generation: number; readonly first: number },
  seqs: readonly number[],
  total: number,
): Maybe<Page<AuditEvent>> {
  const changed = () => table.generation !== read.generation || table.first !== read.first
  const events = mapInTurns(seqs, (seq): AuditEvent | undefined => (changed() ? undefined : table.decode(seq)), query.slice)
  return then(events, (items) => (changed() ? listAuditEvents(table, query) : { items: items as AuditEvent[], total }))
}

/** Whether any event matches: the first one found ends the walk (synchronous, as `exists` is). */
export function auditEventExists(table: AuditEventTable, where: readonly Condition<'audit_events'>[]): boolean {
  const driver = driversOf(table, where).sort(byCost)[0]
  const tests = where.filter((condition) => !driver?.answers.includes(condition)).map((condition) => testOf(table, condition))
  const seqs = driver ? driver.candidates(false).seqs : new SeqRange(table.first, table.last)
  for (let i = 0; i < seqs.length; i++) {
    plannerWork.recordsRead++
    const seq = seqs.at(i)
    const header = table.headerOf(seq)
    if (tests.every((test) => test(header, seq))) return true
  }
  return false
}

/** Sequence numbers in ascending order (or not: see Candidates), by position. */
interface Seqs {
  readonly length: number
  at(i: number): number
  /** Positions [start, end). */
  sub(start: number, end: number): Seqs
}

/** Every sequence number in [from, to), without an array. */
class SeqRange implements Seqs {
  constructor(
    private readonly from: number,
    private readonly to: number,
  ) {}

  get length(): number {
    return this.to - this.from
  }

  at(i: number): number {
    return this.from + i
  }

  sub(start: number, end: number): Seqs {
    return new SeqRange(this.from + start, this.from + end)
  }
}

class SeqArray implements Seqs {
  constructor(private readonly items: Int32Array) {}

  get length(): number {
    return this.items.length
  }

  at(i: number): number {
    return this.items[i]!
  }

  sub(start: number, end: number): Seqs {
    return new SeqArray(this.items.subarray(start, end))
  }
}

/** Candidates of the conditions an index answers. */
/** The driver of the events in some lists (of one index, or a customer's by action), which answer `answers`. */
function listsDriver(found: readonly (SequenceList | undefined)[], answers: readonly Condition<'audit_events'>[]): Driver {
  const lists = found.filter((list) => list !== undefined)
  return {
    estimate: lists.reduce((sum, list) => sum + list.length, 0),
    answers,
    candidates: (copy) => {
      if (lists.length === 1) {
        const list = lists[0]!
        return { seqs: new SeqArray(copy ? list.copy() : list.items.subarray(list.start, list.start + list.length)), ordered: true }
      }
      const all = new Int32Array(lists.reduce((sum, list) => sum + list.length, 0))
      let at = 0
      for (const list of lists) {
        all.set(list.items.subarray(list.start, list.start + list.length), at)
        at += list.length
      }
      return { seqs: new SeqArray(all.sort()), ordered: true }
    },
  }
}

function driversOf(table: AuditEventTable, where: readonly Condition<'audit_events'>[]): Driver[] {
  const drivers: Driver[] = []
  const valuesOf = new Map<string, Condition<'audit_events'> & { in: readonly string[] }>()
  for (const condition of where) if ('field' in condition && 'in' in condition) valuesOf.set(condition.field, condition)
  const listed = new Set<string>()
  const scoped = valuesOf.has('customer_id')
  // A composite list index answers both of its conditions (the finest lists: a customer's events by one token).
  for (const [index, fields] of Object.entries(AUDIT_LIST_INDEXES) as [AuditListIndex, readonly string[]][]) {
    if (!fields.every((field) => valuesOf.has(field))) continue
    // Beside a customer condition, only lists of the customer's own events: walking every
    // customer's events of an action for a few of its own would cost it other tenants' data
    // (docs/security.md), as the targets below.
    if (scoped && !fields.includes('customer_id')) continue
    const conditions = fields.map((field) => valuesOf.get(field)!)
    let keys = ['']
    for (const [i, condition] of conditions.entries()) keys = keys.flatMap((prefix) => [...new Set(condition.in)].map((value) => (i === 0 ? value : `${prefix}|${value}`)))
    drivers.push(listsDriver(keys.map((key) => table.list(index, key)), conditions))
    for (const field of fields) listed.add(field)
  }
  // A customer's events about targets: from its own events alone, whoever else has a record of that id.
  const customers = valuesOf.get('customer_id')
  const targets = valuesOf.get('target_id')
  if (customers && targets) {
    const pairs = [...new Set(customers.in)].flatMap((customer) => [...new Set(targets.in)].map((target) => [customer, target] as const))
    drivers.push({
      estimate: pairs.reduce((sum, [customer, target]) => sum + table.customerTargetCount(customer, target), 0),
      answers: [customers, targets],
      candidates: () => ({ seqs: new SeqArray(Int32Array.from(pairs.flatMap(([customer, target]) => table.customerTargetSequences(customer, target))).sort()), ordered: true }),
    })
  }
  for (const condition of where) {
    if (!('field' in condition) || !('in' in condition)) continue
    const values = [...new Set(condition.in)]
    if (condition.field === 'event_id') {
      const seqs = values.map((id) => table.seqOf(id)).filter((seq) => seq !== -1)
      drivers.push({ estimate: seqs.length, answers: [condition], candidates: () => ({ seqs: new SeqArray(Int32Array.from(seqs).sort()), ordered: true }) })
    } else if (condition.field === 'target_id' && !customers) {
      // Not beside a customer condition: the customer's own events about the targets (above) are
      // never more, and estimating these would look the ids up among every customer's events,
      // which takes longer for another tenant's ids than for unknown ones (docs/security.md).
      drivers.push({
        estimate: values.reduce((sum, target) => sum + table.targetCount(target), 0),
        answers: [condition],
        candidates: () => ({ seqs: new SeqArray(Int32Array.from(values.flatMap((target) => table.targetSequences(target))).sort()), ordered: true }),
      })
    }
  }
  return drivers
}

const isCreatedRange = (condition: Condition<'audit_events'>): condition is Condition<'audit_events'> & { from?: number; until?: number } =>
  'field' in condition && condition.field === 'created' && !('in' in condition) && !('match' in condition) && !('has' in condition)

const rangeTest =
  (from: number, until: number): Test =>
  (header) =>
    header.created >= from && header.created <= until

/** A condition as a test of one event: on its header in place when it can, else on the decoded event. */
function testOf(table: AuditEventTable, condition: Condition<'audit_events'>): Test {
  if ('enrolled' in condition) throw new Error('audit events have no enrollments to filter by')
  if ('anyOf' in condition) {
    const alternatives = condition.anyOf.map((all) => all.map((each) => testOf(table, each)))
    return (header, seq) => alternatives.some((tests) => tests.every((test) => test(header, seq)))
  }
  const field = condition.field as string
  const position = HEADER_INDEX[field]
  if ('in' in condition && position !== undefined) {
    const wanted = new Set(condition.in)
    const indexes = new Set(condition.in.map((value) => table.codec.indexOf(value)).filter((index) => index !== -1))
    return (header) => {
      const value = header.values[position]
      if (typeof value === 'number') return indexes.has(value)
      if (value === UUID_BYTES) return wanted.has(headerValue(table.codec, header, position) as string)
      return typeof value === 'string' && wanted.has(value)
    }
  }
  if (!('in' in condition) && !('match' in condition) && !('has' in condition) && (field === 'created' || field === 'modified')) {
    const { from = -Infinity, until = Infinity } = condition
    return (header) => header[field] >= from && header[field] <= until
  }
  // Anything else (a text match, `changes`): on the decoded event, rare and never on the API's path.
  const valueOf = (seq: number) => (table.decode(seq) as unknown as Record<string, unknown>)[field]
  if ('in' in condition) {
    const wanted = new Set(condition.in)
    return (_, seq) => wanted.has(valueOf(seq) as string)
  }
  if ('match' in condition) {
    const { text, match } = condition
    return (_, seq) => {
      const value = valueOf(seq)
      if (typeof value !== 'string') return false
      return match === 'exact' ? value === text : match === 'contains' ? value.includes(text) : value.startsWith(text)
    }
  }
  if ('has' in condition) return (_, seq) => ((valueOf(seq) as readonly string[] | null) ?? []).includes(condition.has)
  const { from = -Infinity, until = Infinity } = condition
  return (_, seq) => (valueOf(seq) as number) >= from && (valueOf(seq) as number) <= until
}

/** The candidates (ascending) whose event's `created` is within [from, until]: two binary searches. */
function withinCreated(table: AuditEventTable, seqs: Seqs, from: number, until: number): Seqs {
  // Each event the searches read is counted as it is read.
  const created = (i: number) => (plannerWork.recordsRead++, table.createdOf(seqs.at(i)))
  const start = firstInCreationOrder(seqs.length, created, from, true)
  const end = Math.max(start, firstInCreationOrder(seqs.length, created, until, false))
  return start === 0 && end === seqs.length ? seqs : seqs.sub(start, end)
}

/** Indexes of the page at `offset` in [0, length), ascending, or counted from the end for `desc`. */
function slice(length: number, offset: number, size: number, order: 'asc' | 'desc'): number[] {
  const indexes: number[] = []
  if (order === 'asc') {
    for (let i = offset; i < Math.min(length, offset + size); i++) indexes.push(i)
  } else {
    for (let i = length - 1 - offset; i >= Math.max(0, length - offset - size); i--) indexes.push(i)
  }
  return indexes
}

/** Tests candidates WALK_CHUNK at a time, keeping the matches' sequence numbers; never tests one twice. */
class Walk {
  readonly matched: number[] = []
  private next = 0
  private previous = -1

  constructor(
    private readonly table: AuditEventTable,
    private readonly source: Candidates,
    private readonly tests: readonly Test[],
  ) {}

  /** Tests the next chunk; true once every candidate has been tested. */
  step(): boolean {
    const seqs = this.source.seqs
    for (let n = 0; n < WALK_CHUNK; n++) {
      if (this.next >= seqs.length) return true
      const seq = seqs.at(this.next++)
      if (seq === this.previous) continue // a merged list may name one event twice
      this.previous = seq
      // Dropped by retention while the walk yielded.
      if (seq < this.table.first) continue
      plannerWork.recordsRead++
      const header = this.table.headerOf(seq)
      if (this.tests.every((test) => test(header, seq))) this.matched.push(seq)
    }
    return this.next >= seqs.length
  }
}
