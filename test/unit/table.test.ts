import { expect, test } from 'bun:test'
import { Table } from '../../src/store/table'

interface Row {
  readonly id: string
  readonly group: string
  readonly version: number
  readonly created: number
}

const table = () => new Table<Row>({ name: 'rows', key: (r) => r.id, indexes: { group: (r) => r.group } })
const row = (n: number, version = 1): Row => ({ id: `r${n}`, group: `g${n % 7}`, version, created: n })

// The table keeps new keys in a small map merged into the big one every 32,768 keys (so the garbage
// collector does not rescan a huge map on every insert); these cross that boundary several times.
test('inserts, replacements and removals across generation merges read back like a plain Map', () => {
  const t = table()
  const model = new Map<string, Row>()
  const N = 100_000
  for (let n = 0; n < N; n++) {
    const fresh = row(n)
    t.put(fresh)
    model.set(fresh.id, fresh)
    if (n % 3 === 0 && n > 10) {
      const again = row(n - 10, 2) // replace an older record (possibly already merged)
      t.put(again)
      model.set(again.id, again)
    }
    if (n % 997 === 0) {
      t.remove(`r${n}`) // undo of the newest insert
      model.delete(`r${n}`)
    }
  }
  expect(t.size).toBe(model.size)
  for (const [id, expected] of model) expect(t.get(id)).toBe(expected)
  expect(t.has('r997')).toBe(false)
  expect(t.get('r997')).toBeUndefined()
  expect([...t.ids()]).toEqual([...model.keys()]) // creation order: a re-inserted record is the newest
  for (let g = 0; g < 7; g++) {
    const expected = [...t.ids()].filter((id) => model.get(id)!.group === `g${g}`)
    expect([...t.idsBy('group', `g${g}`)]).toEqual(expected)
  }
})

test('put returns the previous version and the observer sees it first', () => {
  const t = table()
  const seen: [string, number | undefined][] = []
  t.observer = (id, previous) => seen.push([id, previous?.version])
  expect(t.put(row(1))).toBeUndefined()
  expect(t.put(row(1, 2))?.version).toBe(1)
  t.remove('r1')
  expect(seen).toEqual([
    ['r1', undefined],
    ['r1', 1],
    ['r1', 2],
  ])
  expect(t.size).toBe(0)
  expect(t.idsBy('group', 'g1')).toEqual([])
})

// Most index keys list one id (a consumer's one enrollment, say): such an entry is the bare id.
test('an index key with one id, then two, then one again after an undo', () => {
  const t = new Table<Row>({ name: 'rows', key: (r) => r.id, indexes: { group: (r) => r.group } })
  const a = { id: 'a', group: 'g', version: 1, created: 1 }
  const b = { id: 'b', group: 'g', version: 1, created: 2 }
  t.put(a)
  expect(t.idsBy('group', 'g')).toEqual(['a'])
  t.put(b)
  expect(t.idsBy('group', 'g')).toEqual(['a', 'b'])
  t.remove('b')
  expect(t.idsBy('group', 'g')).toEqual(['a'])
  t.remove('a')
  expect(t.idsBy('group', 'g')).toEqual([])
  expect(t.idsBy('group', 'other')).toEqual([])
})

test('records from disk go through the decoder, in bulk (loadStored) and one by one (putStored)', () => {
  const t = new Table<Row>({
    name: 'rows',
    key: (r) => r.id,
    indexes: { group: (r) => r.group },
    decode: ({ legacy: _dropped, ...row }) => row as unknown as Row,
  })
  for (let n = 0; n < 40_000; n++) t.loadStored({ ...row(n), legacy: 'x' })
  t.putStored({ ...row(5, 2), legacy: 'x' }) // a log record replacing a snapshot record
  t.putStored({ ...row(40_000), legacy: 'x' })
  expect(t.size).toBe(40_001)
  expect(t.get('r5')).toEqual(row(5, 2))
  expect(t.get('r39999')).toEqual(row(39_999))
  expect(Object.hasOwn(t.get('r40000')!, 'legacy')).toBe(false)
  expect(t.ids().length).toBe(40_001)
  expect(t.idsBy('group', 'g0').length).toBe(Math.ceil(40_001 / 7))
})

test("an owner's records read back by getOwned (collected on first use) after puts, replacements, undos, retention and its undo; another owner's id is a miss", () => {
  const t = new Table<Row>({ name: 'rows', key: (r) => r.id, indexes: { group: (r) => r.group }, owner: { index: 'group', field: 'group' } })
  const model = new Map<string, Row>()
  const check = () => {
    for (let g = 0; g < 7; g++) {
      for (let n = 0; n < 2_000; n += 13) {
        const record = model.get(`r${n}`)
        expect({ g, n, found: t.getOwned(`g${g}`, `r${n}`) }).toEqual({ g, n, found: record?.group === `g${g}` ? record : undefined })
      }
    }
  }
  expect(t.getOwned('g3', 'r3')).toBeUndefined() // asked for before it has records: kept up to date from then on
  for (let n = 0; n < 1_000; n++) model.set(`r${n}`, t.put(row(n)) ?? row(n))
  check() // every owner's records collected from its index
  for (let n = 1_000; n < 2_000; n++) model.set(`r${n}`, t.put(row(n)) ?? row(n))
  for (let n = 0; n < 2_000; n += 5) {
    const again = row(n, 2)
    t.put(again)
    model.set(again.id, again)
  }
  t.remove('r1999') // the undo of the newest insert
  model.delete('r1999')
  check()
  const dropped = t.removeOldest(100) // retention
  for (const record of dropped) model.delete(record.id)
  expect(t.getOwned('g0', 'r0')).toBeUndefined()
  check()
  t.restoreOldest(dropped) // its undo
  for (const record of dropped) model.set(record.id, record)
  check()
  expect(t.getOwned('g9', 'r0')).toBeUndefined() // an owner with no records
})
