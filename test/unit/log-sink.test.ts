/**
 * The log's way to stderr (src/ops/logger.ts, docs/operations.md "Logs"): lines go out in batches,
 * never one write per line; while the reader is slow nothing more is handed over, and what waits is
 * bounded: lines beyond the bound are dropped and counted in a line of their own.
 */
import { expect, test } from 'bun:test'
import { batchedSink } from '../../src/ops/logger'

/** A writer whose flushes stay pending until released (a pipe nobody reads), counting its writes. */
function slowWriter() {
  const writes: string[] = []
  const releases: (() => void)[] = []
  let slow = false
  return {
    writes,
    setSlow: (value: boolean) => void (slow = value),
    release: () => releases.splice(0).forEach((release) => release()),
    write: (bytes: Uint8Array) => void writes.push(new TextDecoder().decode(bytes)),
    flush: () => (slow ? new Promise<number>((resolve) => releases.push(() => resolve(0))) : 0),
  }
}

const dropped = (count: number) => `dropped ${count}\n`

test('lines go out together in one write, not one write each, multi-byte text intact', async () => {
  const writer = slowWriter()
  const batches = batchedSink(writer, dropped)
  batches.sink('café ✓ 🔑\n')
  for (let i = 1; i < 100; i++) batches.sink(`line ${i}\n`)
  expect(writer.writes).toHaveLength(0)
  await batches.flush()
  expect(writer.writes).toHaveLength(1)
  expect(writer.writes[0]!.split('\n').filter(Boolean)).toHaveLength(100)
  expect(writer.writes[0]!.split('\n')[0]).toBe('café ✓ 🔑')
  expect(writer.writes[0]!.split('\n')[99]).toBe('line 99')
})

test('while a batch drains nothing more is written; what waits is bounded, and the dropped lines are counted', async () => {
  const writer = slowWriter()
  const batches = batchedSink(writer, dropped, 1_000)
  writer.setSlow(true)
  batches.sink('first\n')
  const firstFlush = batches.flush()
  expect(writer.writes).toEqual(['first\n'])

  // 10-character lines against a bound of 1,000: 100 wait, the other 400 are dropped.
  for (let i = 0; i < 500; i++) batches.sink(`line ${String(i).padStart(4, '0')}\n`)
  expect(writer.writes).toHaveLength(1)

  writer.setSlow(false)
  writer.release()
  await firstFlush
  await batches.flush()
  expect(writer.writes).toHaveLength(2)
  const lines = writer.writes[1]!.split('\n').filter(Boolean)
  expect(lines).toHaveLength(101)
  expect(lines[0]).toBe('line 0000')
  expect(lines[99]).toBe('line 0099')
  expect(lines[100]).toBe('dropped 400')
})

test('at exit, what waits is taken at once, the count of dropped lines with it', () => {
  const writer = slowWriter()
  const batches = batchedSink(writer, dropped, 20)
  batches.sink('0123456789\n')
  batches.sink('0123456789\n')
  batches.sink('0123456789\n')
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
  expect(text(batches.takeWaiting())).toBe('0123456789\ndropped 2\n')
  expect(text(batches.takeWaiting())).toBe('')
})

test('a line longer than a batch buffer goes out whole, between its neighbours', async () => {
  const writer = slowWriter()
  const batches = batchedSink(writer, dropped)
  const long = 'x'.repeat(200_000)
  batches.sink('before\n')
  batches.sink(`${long}\n`)
  batches.sink('after\n')
  await batches.flush()
  expect(writer.writes.join('')).toBe(`before\n${long}\nafter\n`)
})

test('a batch\'s buffers are filled again only once the writer has written them', async () => {
  // A writer that keeps the bytes it is given (as a pipe's writer may while it drains) and reads
  // them only when its flush completes.
  const kept: Uint8Array[] = []
  const written: string[] = []
  let release = () => {}
  const writer = {
    write: (bytes: Uint8Array) => void kept.push(bytes),
    flush: () =>
      new Promise<number>((resolve) => {
        release = () => {
          written.push(...kept.splice(0).map((bytes) => new TextDecoder().decode(bytes)))
          resolve(0)
        }
      }),
  }
  const batches = batchedSink(writer, dropped)
  const buffers: ArrayBufferLike[] = []
  const lines = Array.from({ length: 8 }, (_, i) => `batch ${i}\n`)
  for (const line of lines) {
    batches.sink(line)
    const flushing = batches.flush()
    buffers.push(kept[0]!.buffer)
    // Lines logged while the batch drains must not land in its buffer.
    for (const filler of ['x', 'y', 'z']) {
      batches.sink(filler.repeat(100))
      batches.takeWaiting()
    }
    release()
    await flushing
  }
  expect(written).toEqual(lines)
  // Taken back once written and filled again: a few buffers in turn, not a new one per batch.
  expect(new Set(buffers).size).toBeLessThanOrEqual(3)
})
