/**
 * The audit events' compact table (src/store/audit-table.ts, audit-codec.ts) and its queries
 * (src/storage/embedded/audit-query.ts): every field reads back exactly as written; every filter,
 * page and order answers what a plain filter over the records answers, before and after drops; a
 * snapshot's encoded events (data format 4) load back as exactly the events written, and damage in
 * them is refused; and the cost is counted (bytes held, events read), never timed.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { AuditEventTable, AUDIT_LIST_INDEXES, type AuditListIndex } from '../../src/store/audit-table'
import { createTables } from '../../src/store/tables'
import { recover } from '../../src/store/recovery'
import { SnapshotDamageError, SnapshotLineError, writeSnapshot } from '../../src/store/snapshot-file'
import { tempDir } from '../support/temp-dirs'
import { AuditCodec, eventEnd, parseTimestamp } from '../../src/store/audit-codec'
import { formatTimestamp } from '../../src/store/clock'
import { newSlice } from '../../src/ops/turns'
import { listAuditEvents } from '../../src/storage/embedded/audit-query'
import { plannerWork, WALK_CHUNK } from '../../src/storage/embedded/planner'
import type { AuditEvent } from '../../src/storage/records'
import type { Condition, ListQuery, Page } from '../../src/storage/storage'

/** A small seeded generator, so a failure replays. */
function random(seed: number) {
  let state = seed >>> 0
  return () => {
    state = (Math.imul(state ^ (state >>> 15), 0x2c1b3c6d) + 0x9e3779b9) >>> 0
    state ^= state >>> 12
    return (state >>> 0) / 2 ** 32
  }
}

const T0 = 1_780_000_000_000_000

function sampleEvents(count: number, seed = 1) {
  const next = random(seed)
  const pick = <T,>(items: readonly T[]) => items[Math.floor(next() * items.length)]!
  const customers = [null, crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()]
  const tokens = [crypto.randomUUID(), crypto.randomUUID()]
  const targets: string[] = []
  const events: AuditEvent[] = []
  for (let n = 0; n < count; n++) {
    const time = T0 + n * 10
    const customer = pick(customers)
    const cli = next() < 0.1
    const reuse = targets.length > 0 && next() < 0.4
    const target = reuse ? pick(targets) : crypto.randomUUID()
    if (!reuse) targets.push(target)
    const token = pick(tokens)
    const action = reuse ? pick(['consumer.suspend', 'consumer.activate', 'enrollment.suspend']) : pick(['consumer.create', 'installation.create', 'enrollment.create'])
    const changes: Record<string, [unknown, unknown]> = reuse
      ? { state: ['active', 'suspended'], modified: [formatTimestamp(time - 5), formatTimestamp(time)] }
      : {
          consumer_id: [null, target],
          organization_id: [null, customer],
          description: [null, `Device ${n}`],
          state: [null, 'active'],
          created: [null, formatTimestamp(time)],
          modified: [null, formatTimestamp(time)],
        }
    events.push({
      event_id: Bun.randomUUIDv7(),
      action,
      target_type: action.slice(0, action.indexOf('.')),
      target_id: target,
      actor_organization_id: cli ? null : customers[1]!,
      actor_token_id: cli ? null : token,
      actor_role: cli ? null : 'admin',
      actor_cli: cli ? 'issue-token' : null,
      customer_id: customer,
      changes,
      trace_id: cli ? null : crypto.randomUUID(),
      created: time,
      modified: time,
    })
  }
  return { events, customers, tokens, targets }
}

/** Events with every kind of value the encoding has (and some that only look like one). */
function oddEvents(): AuditEvent[] {
  const time = T0 + 123_456
  const customer = crypto.randomUUID()
  const target = crypto.randomUUID()
  return [
    {
      event_id: Bun.randomUUIDv7(),
      action: 'organization.create',
      target_type: 'organization',
      target_id: target,
      actor_organization_id: crypto.randomUUID(),
      actor_token_id: crypto.randomUUID(),
      actor_role: 'viewer',
      actor_cli: null,
      customer_id: customer,
      changes: {
        organization_id: [null, target],
        parent_id: [null, customer],
        organization_type: [null, 'partner'],
        description: [null, 'Ünïcødé ✓ and "quotes" \\ and a\nnewline'],
        environments: [null, { default: 'DEV', supported: ['DEV', 'PRODUCTION'] }],
        state: [null, 'active'],
        created: [null, formatTimestamp(time)],
        modified: [null, formatTimestamp(time)],
      },
      trace_id: crypto.randomUUID(),
      created: time,
      modified: time,
    },
    {
      // Not UUIDs, not interned, text that only looks like a timestamp, numbers and booleans.
      event_id: 'E-1',
      action: 'token.create',
      target_type: 'token',
      target_id: crypto.randomUUID().toUpperCase(),
      actor_organization_id: null,
      actor_token_id: null,
      actor_role: null,
      actor_cli: 'init',
      customer_id: null,
      changes: {
        expires: [null, '2026-05-01 12:00:00.000000 +01:00'],
        other: ['2026-02-30 12:00:00.000000 +00:00', '9999-12-31 23:59:59.999999 +00:00'],
        numbers: [-0.5, 1e300],
        flags: [true, false],
        empty: [{}, []],
        nested: [null, { a: [1, { b: null }], '': 'empty key' }],
        // A byte order mark at the start of a string is a character like any other (review 2026-11-29: it was dropped).
        description: ['\uFEFFBOM first', '\uFEFF'],
      },
      trace_id: null,
      created: time + 1,
      modified: time + 7,
    },
  ]
}

function tableOf(events: readonly AuditEvent[], options?: { sequenceLimit?: number }): AuditEventTable {
  const table = new AuditEventTable(options)
  for (const event of events) table.put(event)
  return table
}

/** The answer a plain filter over the records gives (the reference). */
function reference(events: readonly AuditEvent[], query: ListQuery<'audit_events'>): { ids: string[]; total: number } {
  const matches = events.filter((event) =>
    query.where.every((condition) => {
      const value = (event as unknown as Record<string, unknown>)[(condition as { field: string }).field]
      if ('in' in condition) return condition.in.includes(value as string)
      if ('from' in condition || 'until' in condition) return (value as number) >= (condition.from ?? -Infinity) && (value as number) <= (condition.until ?? Infinity)
      throw new Error('not in this test')
    }),
  )
  const ordered = query.order === 'asc' ? matches : [...matches].reverse()
  const page = query.page ? ordered.slice((query.page.number - 1) * query.page.size, query.page.number * query.page.size) : ordered
  return { ids: page.map((event) => event.event_id), total: matches.length }
}

async function answer(table: AuditEventTable, query: ListQuery<'audit_events'>): Promise<{ ids: string[]; total: number }> {
  const page = (await listAuditEvents(table, query)) as Page<AuditEvent>
  return { ids: page.items.map((event) => event.event_id), total: page.total }
}

describe('encoding', () => {
  test('every field of every kind of event reads back exactly, key order included', () => {
    const odd = oddEvents()
    const table = tableOf(odd)
    for (const event of odd) expect(JSON.stringify(table.get(event.event_id))).toBe(JSON.stringify(event))
    expect([...table.values()].map((event) => JSON.stringify(event))).toEqual(odd.map((event) => JSON.stringify(event)))
  })

  test('a timestamp is read back to the microsecond it came from, and only a canonical one is read at all', () => {
    const next = random(21)
    for (let i = 0; i < 20_000; i++) {
      const micros = Math.floor(next() * 7e15) // 1970 to about 2191
      expect(parseTimestamp(formatTimestamp(micros))).toBe(micros)
    }
    for (const text of ['2026-02-29 00:00:00.000000 +00:00', '2026-13-01 00:00:00.000000 +00:00', '2026-05-01 24:00:00.000000 +00:00', '2026-05-01T12:00:00.000000 +00:00', '1969-12-31 23:59:59.999999 +00:00']) {
      expect(parseTimestamp(text)).toBeNull()
    }
    expect(parseTimestamp('2024-02-29 00:00:00.000001 +00:00')).toBe(Date.UTC(2024, 1, 29) * 1000 + 1)
  })

  test('a UUID is 16 bytes and a repeated string one index: a create of an enrollment is under 200 bytes', () => {
    const codec = new AuditCodec()
    const customer = crypto.randomUUID()
    const time = T0
    const enrollment = crypto.randomUUID()
    const record = {
      enrollment_id: enrollment,
      organization_id: customer,
      consumer_id: crypto.randomUUID(),
      installation_id: crypto.randomUUID(),
      application_id: crypto.randomUUID(),
      environment: 'PRODUCTION',
      active_keyset_id: null,
      client_enclave_key: null,
      state: 'active',
      created: formatTimestamp(time),
      modified: formatTimestamp(time),
    }
    const event = {
      event_id: Bun.randomUUIDv7(),
      action: 'enrollment.create',
      target_type: 'enrollment',
      target_id: enrollment,
      actor_organization_id: customer,
      actor_token_id: crypto.randomUUID(),
      actor_role: 'admin',
      actor_cli: null,
      customer_id: customer,
      changes: Object.fromEntries(Object.entries(record).map(([field, value]) => [field, [null, value]])),
      trace_id: crypto.randomUUID(),
      created: time,
      modified: time,
    }
    const first = codec.encode(event).length
    const json = JSON.stringify(event).length
    expect(first).toBeLessThan(200)
    // The second such event: its actor and strings are in the dictionary already.
    expect(codec.encode({ ...event, event_id: Bun.randomUUIDv7() }).length).toBeLessThanOrEqual(first)
    expect(first * 4).toBeLessThan(json)
  })

  test('the table holds fewer than 256 bytes per event, indexes included', () => {
    // Its arrays grow by doubling: 31,000 events fill them as much as a million do (95% of 2^15 and
    // of 2^20); at 20,000 (61%) their unused room was 35 bytes of the figure.
    const { events } = sampleEvents(31_000)
    const table = tableOf(events)
    expect(table.size).toBe(31_000)
    expect(table.bytesHeld / table.size).toBeLessThan(256)
  })
})

describe('queries answer what a plain filter answers', () => {
  const { events, customers, tokens, targets } = sampleEvents(3 * WALK_CHUNK, 7)
  const table = tableOf(events)
  const mid = events[events.length >> 1]!.created
  const queries: [string, Condition<'audit_events'>[]][] = [
    ['nothing', []],
    ['a target', [{ field: 'target_id', in: [targets[3]!] }]],
    ['two targets and an unknown one', [{ field: 'target_id', in: [targets[5]!, targets[9]!, crypto.randomUUID()] }]],
    ['a customer', [{ field: 'customer_id', in: [customers[1]!] }]],
    ['two customers', [{ field: 'customer_id', in: [customers[1]!, customers[2]!] }]],
    ['an actor token', [{ field: 'actor_token_id', in: [tokens[0]!] }]],
    ['a customer and an actor token (the composite index)', [{ field: 'customer_id', in: [customers[2]!] }, { field: 'actor_token_id', in: [tokens[1]!] }]],
    // Targets' events are spread over the customers at random: each target has several customers' events.
    ['a customer and targets (the composite hash index)', [{ field: 'customer_id', in: [customers[1]!] }, { field: 'target_id', in: [targets[0]!, targets[3]!, targets[5]!, crypto.randomUUID()] }]],
    ['customers and a target', [{ field: 'customer_id', in: [customers[2]!, customers[3]!] }, { field: 'target_id', in: [targets[2]!] }]],
    ['actions', [{ field: 'action', in: ['consumer.suspend', 'enrollment.create'] }]],
    ['an action nobody took', [{ field: 'action', in: ['vendor.init'] }]],
    ['since', [{ field: 'created', from: mid }]],
    ['until', [{ field: 'created', until: mid }]],
    ['a customer within a range, by action', [{ field: 'customer_id', in: [customers[3]!] }, { field: 'created', from: T0 + 500, until: mid }, { field: 'action', in: ['consumer.create'] }]],
    ['a target within a range', [{ field: 'target_id', in: [targets[1]!] }, { field: 'created', from: T0 }]],
    ['an event id', [{ field: 'event_id', in: [events[10]!.event_id, events[20]!.event_id] }]],
    ['the CLI', [{ field: 'actor_cli', in: ['issue-token'] }]],
    ['an empty list', [{ field: 'customer_id', in: [] }]],
  ]
  const pagings: Pick<ListQuery<'audit_events'>, 'page' | 'order'>[] = [
    { order: 'asc' },
    { order: 'asc', page: { number: 1, size: 20 } },
    { order: 'desc', page: { number: 1, size: 20 } },
    { order: 'asc', page: { number: 3, size: 7 } },
    { order: 'desc', page: { number: 2, size: 50 } },
    { order: 'asc', page: { number: 10_000, size: 50 } },
  ]
  for (const [name, where] of queries) {
    test(name, async () => {
      for (const paging of pagings) {
        const query = { table: 'audit_events' as const, where, ...paging }
        expect(await answer(table, query)).toEqual(reference(events, query))
      }
    })
  }

  test('after drops of the oldest, a newest removed, and an event replaced', async () => {
    const live = tableOf(events)
    let kept = [...events]
    // Each query once first: a customer's lists by action are made on its first query, then kept up to date.
    for (const [, where] of queries) await answer(live, { table: 'audit_events', where, ...pagings[0]! })
    const later = events.slice(0, 500).map((event, i) => ({ ...event, event_id: Bun.randomUUIDv7(), created: T0 + 50_000_000 + i, modified: T0 + 50_000_000 + i }))
    for (const event of later) live.put(event)
    kept = [...kept, ...later]
    const dropped = live.removeOldest(1000)
    expect(dropped.map((event) => event.event_id)).toEqual(kept.slice(0, 1000).map((event) => event.event_id))
    kept = kept.slice(1000)
    live.remove(kept.at(-1)!.event_id)
    kept = kept.slice(0, -1)
    expect(live.size).toBe(kept.length)
    expect(live.get(events[0]!.event_id)).toBeUndefined()
    for (const [, where] of queries) {
      for (const paging of pagings) {
        const query = { table: 'audit_events' as const, where, ...paging }
        expect(await answer(live, query)).toEqual(reference(kept, query))
      }
    }
    expect(live.ids()).toEqual(kept.map((event) => event.event_id))
  })
})

describe('drops, undo and renumbering', () => {
  test("an undo of the newest event while a query waits for its turn: the query starts again, and never answers the event that took the undone one's number", async () => {
    const { events, customers } = sampleEvents(6_000, 17)
    const mine = events.map((event) => ({ ...event, customer_id: customers[1]! }))
    const table = tableOf(mine)
    for (const where of [[{ field: 'customer_id', in: [customers[1]!] }], [{ field: 'customer_id', in: [customers[1]!] }, { field: 'target_type', in: ['consumer', 'installation', 'enrollment'] }]] as const) {
      // A slice already spent: the query yields before it decodes its page (or walks on).
      const answer = listAuditEvents(table, { table: 'audit_events', where, page: { number: 1, size: 1_000 }, order: 'desc', slice: { ...newSlice(), endsAt: 1 } })
      const newest = mine.at(-1)!
      table.remove(newest.event_id)
      table.put({ ...newest, event_id: Bun.randomUUIDv7(), customer_id: customers[2]! })
      const page = (await answer) as Page<AuditEvent>
      expect(page.items.every((event) => event.customer_id === customers[1])).toBe(true)
      expect(page.total).toBe(5_999)
      table.remove(table.ids().at(-1)!)
      table.put(newest)
    }
  })

  test('a big page is decoded in turns; events dropped by retention meanwhile are not in it, and the total is the new one', async () => {
    // 6 KB of JSON a description: a page of 1,000 takes many turns to decode (docs/security.md, "Big answers").
    const heavy = 'a' + '\u0001'.repeat(1023)
    const events = sampleEvents(1000).events.map((event) => ({ ...event, changes: { description: [null, heavy] as [unknown, unknown] } }))
    const table = tableOf(events)
    // Its request's slice already spent (as a big page's is after its first turn, however fast this machine decodes).
    const spent = { endsAt: 1, tenant: 'x' }
    const page = listAuditEvents(table, { table: 'audit_events', where: [], page: { number: 1, size: 1000 }, order: 'asc', slice: spent })
    expect(page).toBeInstanceOf(Promise)
    table.removeOldest(10) // retention, while the page waits for its next turn
    const { items, total } = await page
    expect(total).toBe(990)
    expect(items.map((event) => event.event_id)).toEqual(events.slice(10).map((event) => event.event_id))
  })

  test('a walk (a filter no index answers) that waits for its turn while retention drops events starts again: every event it answers is still held', async () => {
    const { events } = sampleEvents(30_000, 4)
    const table = tableOf(events)
    const spent = { endsAt: 1, tenant: 'x' }
    // `action` is tested on each event's header: a walk of 30,000 candidates, in turns of WALK_CHUNK.
    const query: ListQuery<'audit_events'> = { table: 'audit_events', where: [{ field: 'action', in: ['consumer.create'] }], page: { number: 1, size: 10 }, order: 'asc', slice: spent }
    const page = listAuditEvents(table, query)
    expect(page).toBeInstanceOf(Promise)
    // Retention while the walk waits: events it matched already, in buffers that are let go.
    table.removeOldest(25_000)
    const answered = (await page) as Page<AuditEvent>
    const kept = events.slice(25_000)
    expect({ ids: answered.items.map((event) => event.event_id), total: answered.total }).toEqual(reference(kept, { ...query, slice: undefined }))
    for (const event of answered.items) expect(table.get(event.event_id)).toEqual(event)
  })

  test('dropping the oldest releases their buffers; their ids and targets are gone from every index', () => {
    const { events } = sampleEvents(30_000, 3)
    const table = tableOf(events)
    const held = table.bytesHeld
    table.removeOldest(25_000)
    expect(table.size).toBe(5_000)
    expect(table.bytesHeld).toBeLessThanOrEqual(held - 2 * 2 ** 20) // at least two of its 1 MiB buffers let go
    for (const event of events.slice(0, 25_000)) expect(table.has(event.event_id)).toBe(false)
    for (const event of events.slice(25_000)) expect(table.get(event.event_id)).toEqual(event)
    for (const event of events.slice(0, 100)) {
      const expected = events.slice(25_000).filter((e) => e.target_id === event.target_id).map((e) => e.event_id)
      expect(table.idsBy('target', event.target_id)).toEqual(expected)
      expect(table.targetCount(event.target_id)).toBe(expected.length)
    }
  })

  test('an undone drop puts the events back at the head; a drop that is not the oldest, and renumbering, keep the order', () => {
    const { events } = sampleEvents(500, 5)
    const table = tableOf(events, { sequenceLimit: 700 })
    const dropped = table.removeOldest(100)
    table.restoreOldest(dropped)
    expect(table.ids()).toEqual(events.map((event) => event.event_id))
    const generation = table.generation
    const middle = [events[200]!.event_id, events[300]!.event_id]
    expect(table.removeIds(middle).map((event) => event.event_id)).toEqual(middle)
    expect(table.generation).not.toBe(generation)
    const kept = events.filter((event) => !middle.includes(event.event_id))
    expect(table.ids()).toEqual(kept.map((event) => event.event_id))
    // Past the sequence limit (700 here) the table renumbers itself and goes on.
    table.removeOldest(300)
    const rest = [...kept.slice(300), ...sampleEvents(400, 6).events.map((event, i) => ({ ...event, created: T0 + 10_000_000 + i, modified: T0 + 10_000_000 + i }))]
    for (const event of rest.slice(kept.length - 300)) table.put(event)
    expect(table.generation).toBe(generation + 2)
    expect(table.ids()).toEqual(rest.map((event) => event.event_id))
    const target = rest.at(-1)!.target_id
    expect(table.idsBy('target', target)).toEqual(rest.filter((e) => e.target_id === target).map((e) => e.event_id))
  })

  test('a capture is not changed by later appends and drops', () => {
    const { events } = sampleEvents(5000, 9)
    const table = tableOf(events.slice(0, 4000))
    const captured = table.capture()
    table.removeOldest(3000)
    for (const event of events.slice(4000)) table.put(event)
    expect([...captured.records()].map((event) => event.event_id)).toEqual(events.slice(0, 4000).map((event) => event.event_id))
  })
})

describe('cost, counted', () => {
  test('a target query reads its target\'s events, whatever the table holds', async () => {
    const read = async (size: number) => {
      const { events } = sampleEvents(size, 11)
      const table = tableOf(events)
      const target = events[size >> 1]!.target_id
      const before = plannerWork.recordsRead
      const page = (await listAuditEvents(table, { table: 'audit_events', where: [{ field: 'target_id', in: [target] }], page: { number: 1, size: 20 }, order: 'asc' })) as Page<AuditEvent>
      return { read: plannerWork.recordsRead - before, total: page.total }
    }
    const small = await read(1_000)
    const large = await read(50_000)
    expect(small.read).toBe(small.total)
    expect(large.read).toBe(large.total)
  })

  test("a customer's target query reads the page of its own events about it, none of another customer's", async () => {
    const { events, customers } = sampleEvents(2_000, 13)
    const target = crypto.randomUUID()
    const about = (customer: string | null, n: number) => ({ ...events[n]!, event_id: Bun.randomUUIDv7(), target_id: target, customer_id: customer, created: T0 + 100_000 + n, modified: T0 + 100_000 + n })
    // 500 events of one customer about the target, 3 of another's (a record with the same id).
    const table = tableOf([...events, ...Array.from({ length: 500 }, (_, n) => about(customers[1]!, n)), ...[0, 1, 2].map((n) => about(customers[2]!, 600 + n))])
    const query = (customer: string) => ({ table: 'audit_events' as const, where: [{ field: 'customer_id' as const, in: [customer] }, { field: 'target_id' as const, in: [target] }], page: { number: 1, size: 20 }, order: 'asc' as const })
    for (const [customer, total] of [[customers[2]!, 3], [customers[1]!, 500], [customers[3]!, 0]] as const) {
      const before = plannerWork.recordsRead
      const page = (await listAuditEvents(table, query(customer))) as Page<AuditEvent>
      expect({ customer, total: page.total, read: plannerWork.recordsRead - before }).toEqual({ customer, total, read: Math.min(total, 20) })
      expect(page.items.every((event) => event.customer_id === customer && event.target_id === target)).toBe(true)
    }
  })

  test("a customer's page of its own token's events is a slice of their list: it reads the page, not every event of the token", async () => {
    const { events } = sampleEvents(3_000, 14)
    const customer = crypto.randomUUID()
    const token = crypto.randomUUID()
    // Every event of the token is the customer's (a customer's own token): its list by actor token and its list by both hold the same events.
    const own = events.slice(0, 1_000).map((event) => ({ ...event, customer_id: customer, actor_token_id: token }))
    const table = tableOf([...own, ...events.slice(1_000)])
    const before = plannerWork.recordsRead
    const page = (await listAuditEvents(table, {
      table: 'audit_events',
      where: [{ field: 'customer_id', in: [customer] }, { field: 'actor_token_id', in: [token] }],
      page: { number: 2, size: 20 },
      order: 'asc',
    })) as Page<AuditEvent>
    expect([page.total, page.items.length, plannerWork.recordsRead - before]).toEqual([1_000, 20, 20])
  })

  test("an actions filter: the vendor's is a slice of that action's events; a customer's reads its own events, never the action's list of every customer", async () => {
    const { events, customers } = sampleEvents(20_000, 15)
    const revoked = (customer: string, n: number) => ({ ...events[n]!, event_id: Bun.randomUUIDv7(), action: 'token.revoke', customer_id: customer, created: T0 + 300_000 + n, modified: T0 + 300_000 + n })
    const all = [...events, ...Array.from({ length: 30 }, (_, n) => revoked(customers[1]!, n)), ...Array.from({ length: 5 }, (_, n) => revoked(customers[2]!, 100 + n))]
    const table = tableOf(all)
    const own = all.filter((event) => event.customer_id === customers[2]).length
    const cases = [
      // Without the list by action, the vendor's walk read every event.
      [[{ field: 'action', in: ['token.revoke'] }], 35, 20],
      // The list by action (35 events) is shorter than the customer's own, but holds other customers' events.
      [[{ field: 'customer_id', in: [customers[2]!] }, { field: 'action', in: ['token.revoke'] }], 5, own],
    ] as const
    for (const [where, total, read] of cases) {
      const before = plannerWork.recordsRead
      const page = (await listAuditEvents(table, { table: 'audit_events', where, page: { number: 1, size: 20 }, order: 'desc' })) as Page<AuditEvent>
      expect({ where, total: page.total, read: plannerWork.recordsRead - before }).toEqual({ where, total, read })
    }
  })

  test('a customer\'s page within a range reads the page and two binary searches, not the customer\'s events', async () => {
    const { events, customers } = sampleEvents(40_000, 12)
    const table = tableOf(events)
    const before = plannerWork.recordsRead
    const page = (await listAuditEvents(table, {
      table: 'audit_events',
      where: [{ field: 'customer_id', in: [customers[1]!] }, { field: 'created', from: T0 + 100_000 }],
      page: { number: 2, size: 20 },
      order: 'desc',
    })) as Page<AuditEvent>
    expect(page.items).toHaveLength(20)
    expect(page.total).toBeGreaterThan(5_000)
    expect(plannerWork.recordsRead - before).toBeLessThanOrEqual(20 + 2 * 15)
  })
})

describe('snapshots hold the events encoded (data format 4)', () => {
  const parent = tempDir('keyward-audit-snapshot-')
  afterAll(() => rmSync(parent, { recursive: true, force: true }))
  let dirs = 0

  /** Writes `lines` as a snapshot's audit events and loads it as start-up does (recovery.ts); also returns the file's text. */
  async function throughSnapshot(lines: Iterable<unknown>): Promise<{ table: AuditEventTable; text: string; newest: number }> {
    const dir = join(parent, `dir-${++dirs}`)
    await Bun.write(join(dir, '.keep'), '')
    await writeSnapshot(join(dir, 'snapshot.json'), { format: 1, lsn: 1, meta: {}, tables: { audit_events: lines } })
    const tables = createTables()
    const recovered = await recover(dir, tables, { repair: false, warn: () => {}, paddedLog: true })
    return { table: tables.audit_events, text: readFileSync(join(dir, 'snapshot.json'), 'utf8'), newest: recovered.newestTimestamp }
  }

  /** Every event, byte for byte as JSON, and every index, alike in both tables. */
  function expectSame(loaded: AuditEventTable, original: AuditEventTable): void {
    expect([...loaded.values()].map((event) => JSON.stringify(event))).toEqual([...original.values()].map((event) => JSON.stringify(event)))
    expect(loaded.ids()).toEqual(original.ids())
    expect(loaded.size).toBe(original.size)
    const events = [...original.values()]
    for (const event of events.filter((_, i) => i % 7 === 0)) {
      expect(loaded.get(event.event_id)).toEqual(event)
      expect(loaded.idsBy('target', event.target_id)).toEqual(original.idsBy('target', event.target_id))
      expect(loaded.targetCount(event.target_id)).toBe(original.targetCount(event.target_id))
    }
    for (const index of Object.keys(AUDIT_LIST_INDEXES) as AuditListIndex[]) {
      const keys = new Set(events.map((event) => AUDIT_LIST_INDEXES[index].map((field) => event[field]).join('|')))
      for (const key of keys) expect(loaded.idsBy(index, key)).toEqual(original.idsBy(index, key))
    }
    expect(loaded.codec.dictionarySize).toBe(original.codec.dictionarySize)
  }

  test('every kind of value, across buffers, an event larger than a buffer, after drops: read back exactly, indexes included, and again after more writes', async () => {
    const huge: AuditEvent = { ...oddEvents()[0]!, event_id: crypto.randomUUID(), changes: { description: [null, 'ü'.repeat(700_000)] } }
    const events = [...oddEvents(), ...sampleEvents(6000, 31).events, huge, ...sampleEvents(3000, 32).events]
    const original = tableOf(events)
    original.removeOldest(2500) // the first buffer's head goes
    const { table, text, newest } = await throughSnapshot(original.capture().snapshotLines())
    expectSame(table, original)
    expect(newest).toBe(Math.max(...[...original.values()].map((event) => Math.max(event.created, event.modified))))
    // No event is a JSON record: a line of dictionary strings, then a line of bytes per buffer.
    expect(text).not.toContain('"event_id"')
    expect(text.match(/\n\["strings",/g)?.length).toBe(1)
    expect(text.match(/\n\["events",/g)?.length).toBeGreaterThanOrEqual(3)

    // Loaded, the table goes on like the original: appends, drops, another snapshot.
    const more = sampleEvents(2000, 33).events
    for (const target of [table, original]) {
      for (const event of more) target.put(event)
      target.removeOldest(4000)
    }
    expectSame(table, original)
    expectSame((await throughSnapshot(table.capture().snapshotLines())).table, original)
  })

  test('the snapshot holds the events as of the capture, whatever is appended, dropped or undone after', async () => {
    const { events } = sampleEvents(6000, 41)
    const table = tableOf(events.slice(0, 5000))
    const dropped = table.removeOldest(10) // by a transaction not yet durable: written as records, first
    const queued = [events[4998]!.event_id, events[4999]!.event_id] // inserts not yet durable: left out
    const captured = table.capture(new Set(queued))
    table.remove(events[4999]!.event_id) // undone: its bytes are taken back and written over
    table.remove(events[4998]!.event_id)
    table.removeOldest(3000)
    for (const event of events.slice(5000)) table.put(event)
    const { table: loaded } = await throughSnapshot(captured.snapshotLines(dropped))
    expect(loaded.ids()).toEqual(events.slice(0, 4998).map((event) => event.event_id))
    expectSame(loaded, tableOf(events.slice(0, 4998)))
  })

  test('an event whose id repeats, stored then refused, leaves no bytes between the events of its buffer', async () => {
    const { events } = sampleEvents(300, 42)
    const table = tableOf(events.slice(0, 200))
    const used = (table as unknown as { used: number }).used
    expect((table as unknown as { append(record: AuditEvent): boolean }).append(events[50]!)).toBe(false)
    expect((table as unknown as { used: number }).used).toBe(used)
    for (const event of events.slice(200)) table.put(event)
    expectSame((await throughSnapshot(table.capture().snapshotLines())).table, tableOf(events))
  })

  describe('damage in the encoded lines is refused, never loaded as other events', () => {
    const original = tableOf([...oddEvents(), ...sampleEvents(40, 51).events])
    const [strings, eventsLine] = [...original.capture().snapshotLines()] as [unknown[], [string, number, string]]
    const bytes = Uint8Array.fromBase64(eventsLine[2])
    const load = (...lines: unknown[][]) => {
      const table = new AuditEventTable()
      for (const line of lines) table.loadSnapshotLine(line)
      return table
    }
    const refused = (...lines: unknown[][]) => expect(() => load(...lines)).toThrow(SnapshotLineError)

    test('intact, they load', () => {
      expectSame(load(strings, eventsLine), original)
    })

    test('bytes cut short anywhere, or with bytes after the last event', () => {
      for (let length = 0; length < bytes.length; length++) refused(strings, ['events', 42, bytes.subarray(0, length).toBase64()])
      refused(strings, ['events', 42, Uint8Array.of(...bytes, 0).toBase64()])
    })

    test('a count that is not the number of events', () => {
      for (const count of [41, 43, 0, -1, 1.5, '42']) refused(strings, ['events', count, eventsLine[2]])
    })

    test('base64 that is not strictly base64', () => {
      const text = eventsLine[2]
      for (const bad of [`${text.slice(0, 10)}!${text.slice(11)}`, `${text.slice(0, 10)}-${text.slice(11)}`, `${text.slice(0, 10)} ${text.slice(10)}`, `${text} `, text.slice(0, -1), `${text}====`]) refused(strings, ['events', 42, bad])
    })

    test('dictionary entries missing, repeated or out of order', () => {
      refused(['events', 42, eventsLine[2]]) // its dictionary indexes point nowhere
      refused(strings, strings, eventsLine)
      refused(['strings', 1, ...strings.slice(2)], eventsLine)
      refused(['strings', 0, 'a', 'a'])
      refused(['strings', 0, 7])
    })

    test('an event id that repeats, an unknown line', () => {
      const first = checkEventEnd(bytes)
      refused(strings, ['events', 43, Uint8Array.of(...bytes, ...bytes.subarray(0, first)).toBase64()])
      refused(['blobs', 1, 'AAAA'])
      refused(['events', 42])
    })

    test('in a snapshot file, with its checksums intact: damage at that line, naming it', async () => {
      const error = await throughSnapshot([strings, ['events', 42, bytes.subarray(0, bytes.length - 3).toBase64()]]).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(SnapshotDamageError)
      const text = readFileSync((error as SnapshotDamageError).file, 'utf8')
      expect((error as SnapshotDamageError).offset).toBe(text.indexOf('["events",'))
      expect((error as Error).message).toContain('event 42 of 42 is not a whole, valid event')
    })
  })
})

/** Where the first event of `bytes` ends. */
function checkEventEnd(bytes: Uint8Array): number {
  return eventEnd(bytes, 0)
}
