/**
 * listPage's cost rule: a filtered page reads the records it returns, not every match, when one
 * index list drives and the caller's scope is implied by keys already checked against it.
 */
import { expect, test } from 'bun:test'
import { Table } from '../../src/store/table'
import { asScope, indexFilter, inScope, listPage } from '../../src/modules/shared/list'

interface Row {
  readonly id: string
  readonly owner: string
  readonly group: string
  readonly created: number
}

function rows(n: number) {
  const table = new Table<Row>({ name: 'rows', key: (r) => r.id, indexes: { owner: (r) => r.owner, group: (r) => r.group } })
  for (let i = 0; i < n; i++) table.put({ id: `r${i}`, owner: i % 2 ? 'acme' : 'other', group: `g${i % 4}`, created: i })
  let reads = 0
  const get = table.get.bind(table)
  table.get = (id: string) => (reads++, get(id))
  return { table, reads: () => reads }
}

const owner = (table: Table<Row>) => indexFilter(table, 'owner', ['acme'], (r) => r.owner)
const group = (table: Table<Row>, key: string) => indexFilter(table, 'group', [key], (r) => r.group)

test('a scope implied by the driving filter is not tested: the page is a slice', () => {
  const { table, reads } = rows(10_000)
  // g1 and g3 hold only acme's rows (odd ids): checked by the caller, so `inScope`.
  const page = listPage(table, [asScope(owner(table)), inScope(group(table, 'g1'))], { page: 3, pageSize: 25, order: 'asc' })
  expect(page.total).toBe(2_500)
  expect(page.items.map((r) => r.id)).toEqual(Array.from({ length: 25 }, (_, k) => `r${(50 + k) * 4 + 1}`))
  expect(reads()).toBe(25)
})

test('without that promise every candidate is tested, with the same answer', () => {
  const { table, reads } = rows(10_000)
  const page = listPage(table, [asScope(owner(table)), group(table, 'g1')], { page: 3, pageSize: 25, order: 'asc' })
  expect(page.total).toBe(2_500)
  expect(page.items.map((r) => r.id)).toEqual(Array.from({ length: 25 }, (_, k) => `r${(50 + k) * 4 + 1}`))
  expect(reads()).toBe(2_500)
})

test('a scope test still applies to a driver not known to be inside it', () => {
  const { table } = rows(100)
  // g0 holds only the other tenant's rows (even ids): nothing of acme's.
  expect(listPage(table, [asScope(owner(table)), group(table, 'g0')], { pageSize: 25, order: 'asc' }).total).toBe(0)
})
