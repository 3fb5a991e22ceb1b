/**
 * A view's JSON text remembered per record object (src/modules/shared/model.ts, `rememberedView`):
 * a record read again is not viewed again, a changed record (a new object) is, and what is kept is
 * bounded.
 */
import { expect, test } from 'bun:test'
import { rememberedView } from '../../src/modules/shared/model'

interface Item {
  readonly id: number
  readonly state: string
}

function counted() {
  let views = 0
  const text = rememberedView((item: Item) => (views++, { id: item.id, state: item.state }))
  return { text, views: () => views }
}

test('the same record object is viewed once, and answered the same text', () => {
  const { text, views } = counted()
  const item = { id: 1, state: 'active' }
  expect(text(item)).toBe('{"id":1,"state":"active"}')
  expect(text(item)).toBe('{"id":1,"state":"active"}')
  expect(views()).toBe(1)
})

test('a changed record, a new object as the stores make, is viewed again', () => {
  const { text, views } = counted()
  const before = { id: 1, state: 'active' }
  text(before)
  const after = { ...before, state: 'suspended' }
  expect(text(after)).toBe('{"id":1,"state":"suspended"}')
  expect(views()).toBe(2)
})

test('what is remembered is bounded: past the bound it starts again, and answers stay right', () => {
  const { text, views } = counted()
  const items = Array.from({ length: 3000 }, (_, id) => ({ id, state: 'active' }))
  for (const item of items) text(item)
  expect(views()).toBe(3000)
  // The first ones were let go when the texts were cleared: viewed again, with the same text.
  expect(text(items[0]!)).toBe('{"id":0,"state":"active"}')
  expect(views()).toBe(3001)
  // The last one is still remembered.
  expect(text(items[2999]!)).toBe('{"id":2999,"state":"active"}')
  expect(views()).toBe(3001)
})
