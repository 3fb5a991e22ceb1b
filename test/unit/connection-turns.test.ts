/**
 * Tenants' turns at a pool's connections in database mode (src/storage/postgres/connection-turns.ts):
 * a tenant never holds every slot, and waiting work goes in turn per tenant, so one tenant's slow
 * lists or many changes do not queue another's behind them.
 */
import { expect, test } from 'bun:test'
import { ConnectionTurns } from '../../src/storage/postgres/connection-turns'
import { DatabaseUnavailableError } from '../../src/storage/postgres/errors'

/** A deadline far away (`performance.now()` time). */
const far = () => performance.now() + 60_000

/** A list that runs until `finish` is called; `started` tells whether it began. */
function heldList() {
  let finish!: () => void
  const done = new Promise<void>((resolve) => (finish = resolve))
  const list = { started: false, finish, run: async () => ((list.started = true), await done) }
  return list
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

/** Held lists named by tenant and number (`A1`: tenant A's first), run on `slots`; `order` is the order they began in. */
function namedLists(slots: ConnectionTurns) {
  const order: string[] = []
  const lists = new Map<string, ReturnType<typeof heldList>>()
  const start = (name: string) => {
    const list = heldList()
    lists.set(name, list)
    return slots.run(name[0]!, far(), async () => (order.push(name), await list.run()))
  }
  return { order, lists, start }
}

test("a tenant holds all slots but one: another tenant's list runs at once, however many the first one sends", async () => {
  const slots = new ConnectionTurns(4)
  const big = Array.from({ length: 8 }, heldList)
  const running = big.map((list) => slots.run('big', far(), list.run))
  await turn()
  expect(big.filter((list) => list.started)).toHaveLength(3)
  const small = heldList()
  const smallDone = slots.run('small', far(), small.run)
  await turn()
  expect(small.started).toBe(true)
  small.finish()
  await smallDone
  for (const list of big) list.finish()
  await Promise.all(running)
  expect(big.every((list) => list.started)).toBe(true)
  expect(slots.counts).toEqual({ running: 0, waiting: 0, tenants: 0 })
})

test('waiting lists go in turn per tenant, each tenant\'s in order', async () => {
  const slots = new ConnectionTurns(2) // one each at most
  const { order, lists, start } = namedLists(slots)
  const all = ['A1', 'A2', 'A3', 'B1', 'B2'].map(start)
  await turn()
  expect(order).toEqual(['A1', 'B1']) // one slot each
  for (const name of ['A1', 'B1', 'A2', 'B2', 'A3']) {
    lists.get(name)!.finish()
    await turn()
  }
  await Promise.all(all)
  expect(order).toEqual(['A1', 'B1', 'A2', 'B2', 'A3'])
})

test("on one slot, a tenant whose lists queued first waits for the next turn, not for another of them: the tenant served least recently goes first", async () => {
  const slots = new ConnectionTurns(1)
  const { order, lists, start } = namedLists(slots)
  const big = ['A1', 'A2', 'A3'].map(start)
  await turn()
  const small = start('B1') // arrives while A1 runs and A2 and A3 wait
  await turn()
  for (const name of ['A1', 'B1', 'A2', 'A3']) {
    lists.get(name)!.finish()
    await turn()
  }
  await Promise.all([...big, small])
  expect(order).toEqual(['A1', 'B1', 'A2', 'A3'])
  expect(slots.counts).toEqual({ running: 0, waiting: 0, tenants: 0 })
})

test("turns are shared by the time they take, not by their count: on one slot, a tenant's 1 ms pages go on while a tenant's 30 ms page has held the slot longer", async () => {
  let clock = 0
  const slots = new ConnectionTurns(1, () => clock)
  const { order, lists, start } = namedLists(slots)
  const big = ['A1', 'A2', 'A3'].map(start)
  await turn()
  const small = ['B1', 'B2', 'B3'].map(start) // arrive while A1 runs
  await turn()
  const took = (name: string) => (name[0] === 'A' ? 30 : 1)
  for (let n = 0; n < 6; n++) {
    const name = order[n]!
    clock += took(name)
    lists.get(name)!.finish()
    await turn()
  }
  await Promise.all([...big, ...small])
  // By count it was A1 B1 A2 B2 A3 B3: the small tenant's pages held to the big one's rate.
  expect(order).toEqual(['A1', 'B1', 'B2', 'B3', 'A2', 'A3'])
  expect(slots.counts).toEqual({ running: 0, waiting: 0, tenants: 0 })
})

test('a tenant that begins to compete starts even with the least time of the others, not at none: it does not take every turn until it has caught up', async () => {
  let clock = 0
  const slots = new ConnectionTurns(1, () => clock)
  const { order, lists, start } = namedLists(slots)
  const first = ['A1', 'A2'].map(start)
  await turn()
  for (const name of ['A1']) {
    clock += 1000 // A has held the slot a second before B comes
    lists.get(name)!.finish()
    await turn()
  }
  const later = ['B1', 'B2', 'A3'].map(start) // A2 runs; B's pages and A3 wait
  await turn()
  for (let n = 1; n < 5; n++) {
    const name = order[n]!
    clock += 10
    lists.get(name)!.finish()
    await turn()
  }
  await Promise.all([...first, ...later])
  // B began even with A (1,000 ms), not at 0, which would have let B's pages all go before A3.
  expect(order).toEqual(['A1', 'A2', 'B1', 'A3', 'B2'])
})

test('a tenant with two requests in flight is not held out by many tenants that each send one at a time: a tenant idle between its requests does not come back at the front', async () => {
  let clock = 0
  const slots = new ConnectionTurns(1, () => clock)
  const admitted: string[] = []
  const running: { readonly tenant: string; readonly finish: () => void }[] = []
  const ADMISSIONS = 300
  /** One client of `tenant` sending its next request as soon as the last is answered, until the run has seen ADMISSIONS. */
  const client = (tenant: string): Promise<void> => {
    let finish!: () => void
    const done = new Promise<void>((resolve) => (finish = resolve))
    return slots
      .run(tenant, far(), async () => {
        admitted.push(tenant)
        running.push({ tenant, finish })
        await done
      })
      .then(() => (admitted.length < ADMISSIONS ? client(tenant) : undefined))
  }
  const clients = [client('V'), client('V'), ...Array.from({ length: 20 }, (_, i) => client(`C${i}`))]
  await turn()
  while (running.length > 0) {
    const work = running.shift()!
    clock += work.tenant === 'V' ? 1 : 30 // V's small pages take 1 ms, the others' pages 30 ms
    work.finish()
    await turn()
  }
  await Promise.all(clients)
  // By time, V's 1 ms pages get about thirty turns for each of the others' 30 ms pages. When a tenant
  // was forgotten as it went idle, each of the twenty came back at the front: V got no turn after
  // its first ones, and every request of it waited until 503.
  const ofV = admitted.slice(50).filter((tenant) => tenant === 'V').length
  expect(ofV).toBeGreaterThan((admitted.length - 50) / 3)
  expect(slots.counts).toEqual({ running: 0, waiting: 0, tenants: 0 })
})

test('time a tenant held a slot while nobody else wanted it is no debt once it has been idle: its next request waits one round, not until the others have caught up', async () => {
  let clock = 0
  const slots = new ConnectionTurns(1, () => clock)
  const { order, lists, start } = namedLists(slots)
  const alone = start('L1') // a 5 s list, nobody else waiting
  await turn()
  clock += 5000
  lists.get('L1')!.finish()
  await alone
  clock += 30_000 // idle
  // Three tenants loop 30 ms pages; L sends one list while they do.
  let rounds = 0
  const client = (tenant: string): Promise<void> => {
    const name = `${tenant}${++rounds}`
    return start(name).then(() => (rounds < 60 ? client(tenant) : undefined))
  }
  const clients = ['A', 'B', 'C'].map(client)
  await turn()
  const later = start('L2')
  await turn()
  // One slot: the one list started and not yet finished runs; finish it after its time, in turn.
  const finished = new Set(['L1'])
  for (let running = order.find((name) => !finished.has(name)); running !== undefined; running = order.find((name) => !finished.has(name))) {
    finished.add(running)
    clock += running.startsWith('L') ? 10 : 30
    lists.get(running)!.finish()
    await turn()
  }
  await Promise.all([...clients, later])
  // L2 waited for at most one page of each other tenant (it began even with them), not for the 5 s
  // that L1 held the slot alone (about 170 of their pages).
  expect(order.indexOf('L2') - order.indexOf('L1')).toBeLessThanOrEqual(5)
})

test('a list that got no slot within its deadline is 503 and never runs', async () => {
  const slots = new ConnectionTurns(2)
  const holder = heldList()
  const held = slots.run('a', far(), holder.run)
  const other = heldList()
  const otherHeld = slots.run('b', far(), other.run)
  const late = heldList()
  const outcome = await slots.run('a', performance.now() + 20, late.run).catch((error) => error)
  expect(outcome).toBeInstanceOf(DatabaseUnavailableError)
  holder.finish()
  other.finish()
  await Promise.all([held, otherHeld])
  expect(late.started).toBe(false)
  expect(slots.counts).toEqual({ running: 0, waiting: 0, tenants: 0 })
})

test('a list let in with too little time left to answer is 503 and not sent: it would run on after its caller was answered', async () => {
  const slots = new ConnectionTurns(2)
  const late = heldList()
  // A slot is free, but its deadline is 10 ms away.
  expect(await slots.run('a', performance.now() + 10, late.run).catch((error) => error)).toBeInstanceOf(DatabaseUnavailableError)
  expect(late.started).toBe(false)
  expect(slots.counts).toEqual({ running: 0, waiting: 0, tenants: 0 })
})
