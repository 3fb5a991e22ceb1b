/**
 * The log's way to stderr (src/ops/log-sink.ts, docs/operations.md "Logs"): lines go out in batches,
 * never one write per line; while the reader is slow nothing more is handed over, and what waits is
 * bounded: lines beyond the bound are dropped and counted in a line of their own.
 */
import { expect, spyOn, test } from 'bun:test'
import { createLogger, formatLine } from '../../src/ops/logger'
import { batchedSink, type Written } from '../../src/ops/log-sink'

/** A writer whose writes stay pending until released (a pipe nobody reads), counting them. */
function slowWriter() {
  const writes: string[] = []
  const releases: (() => void)[] = []
  let slow = false
  return {
    writes,
    setSlow: (value: boolean) => void (slow = value),
    release: () => releases.splice(0).forEach((release) => release()),
    write: (bytes: Uint8Array): Written | Promise<Written> => {
      writes.push(new TextDecoder().decode(bytes))
      return slow ? new Promise((resolve) => releases.push(() => resolve({ bytes: bytes.length }))) : { bytes: bytes.length }
    },
  }
}

const dropped = (count: number, error: string | undefined) => `dropped ${count}${error ? ` (${error})` : ''}\n`

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
  // The lines, then the count of the dropped ones (a write of its own).
  expect(writer.writes).toHaveLength(3)
  const lines = writer.writes.slice(1).join('').split('\n').filter(Boolean)
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
    write: (bytes: Uint8Array) => {
      kept.push(bytes)
      return new Promise<Written>((resolve) => {
        release = () => {
          written.push(...kept.splice(0).map((bytes) => new TextDecoder().decode(bytes)))
          resolve({ bytes: bytes.length })
        }
      })
    },
  }
  const batches = batchedSink(writer, dropped)
  const buffers: ArrayBufferLike[] = []
  const lines = Array.from({ length: 8 }, (_, i) => `batch ${i}\n`)
  for (const line of lines) {
    batches.sink(line)
    const flushing = batches.flush()
    buffers.push(kept[0]!.buffer)
    // Lines logged while the batch drains must not land in its buffer: they go with the next batch.
    for (const filler of ['x', 'y', 'z']) batches.sink(`${filler.repeat(100)}\n`)
    release()
    await flushing
  }
  const fillers = `${'x'.repeat(100)}\n${'y'.repeat(100)}\n${'z'.repeat(100)}\n`
  expect(written.join('')).toBe(lines.join(fillers))
  // Taken back once written and filled again: a few buffers in turn, not a new one per batch.
  expect(new Set(buffers).size).toBeLessThanOrEqual(3)
})

/**
 * A writer like a file on a disk that fills up: it takes `room` bytes more, then fails with ENOSPC
 * (after writing what fits of the bytes in hand), until given room again.
 */
function fillingWriter(room: number) {
  let written = ''
  let left = room
  return {
    text: () => written,
    makeRoom: (bytes: number) => void (left = bytes),
    write: (bytes: Uint8Array): Written => {
      const taken = Math.min(left, bytes.length)
      written += new TextDecoder().decode(bytes.subarray(0, taken))
      left -= taken
      return taken < bytes.length ? { bytes: taken, error: 'ENOSPC' } : { bytes: taken }
    },
  }
}

test('a write that fails (a full disk) throws nothing: the cut line is finished first once writes work, the lost lines counted with the error', async () => {
  const writer = fillingWriter(25)
  const batches = batchedSink(writer, dropped)
  for (const line of ['line one\n', 'line two\n', 'line three\n', 'line four\n']) batches.sink(line)
  await batches.flush()
  // 25 bytes: two lines and 7 bytes of the third, which is kept; the fourth is lost.
  expect(writer.text()).toBe('line one\nline two\nline th')
  batches.sink('line five\n')
  await batches.flush() // still full: nothing more, nothing thrown
  expect(writer.text()).toBe('line one\nline two\nline th')
  writer.makeRoom(1_000)
  batches.sink('line six\n')
  await batches.flush()
  // Whole lines only: the third finished, the new one, then the line counting the lost ones (four
  // and five; the first count's line, lost too, is not one of them: its count is in this one).
  expect(writer.text().split('\n')).toEqual(['line one', 'line two', 'line three', 'line six', 'dropped 2 (ENOSPC)', ''])
})

test('a writer that fails at once (a reader gone: EPIPE) costs lines, never an exception; at exit what waits is taken', async () => {
  const writer = { write: (): Written => ({ bytes: 0, error: 'EPIPE' }) }
  const batches = batchedSink(writer, dropped)
  for (let i = 0; i < 5; i++) batches.sink(`line ${i}\n`)
  await batches.flush()
  batches.sink('last\n')
  expect(new TextDecoder().decode(batches.takeWaiting())).toBe('last\ndropped 5 (EPIPE)\n')
})

test('a reader that has stopped reading: flush gives up after the time it is given, and at exit nothing is written', async () => {
  const writer = slowWriter()
  const batches = batchedSink(writer, dropped)
  writer.setSlow(true)
  batches.sink('stuck\n')
  void batches.flush()
  batches.sink('waiting\n')
  expect(await batches.flush(20)).toBe(false)
  // A synchronous write now could block the exit for ever.
  expect(batches.takeWaiting()).toHaveLength(0)
  writer.setSlow(false)
  writer.release()
  expect(await batches.flush(1_000)).toBe(true)
  expect(writer.writes).toEqual(['stuck\n', 'waiting\n'])
})

test("each line has the time it was written (to the millisecond), not an earlier line's", () => {
  const lines: string[] = []
  const logger = createLogger('json', (line) => lines.push(line))
  const clock = spyOn(Date, 'now')
  try {
    for (const [i, millis] of [1_780_000_000_000, 1_780_000_000_005, 1_780_000_000_005, 1_780_000_001_000].entries()) {
      clock.mockReturnValue(millis)
      if (i % 2 === 0) logger.info('a line')
      else logger.requests('GET', '/healthz')(200, 0.01, undefined, undefined, undefined, 15)
    }
  } finally {
    clock.mockRestore()
  }
  expect(lines.map((line) => JSON.parse(line).time)).toEqual(['2026-05-28T20:26:40.000Z', '2026-05-28T20:26:40.005Z', '2026-05-28T20:26:40.005Z', '2026-05-28T20:26:41.000Z'])
})

test('--log-format text: a value that is not one plain word is quoted, so that a line splits back into its fields', () => {
  const line = formatLine('text', '2026-01-01T00:00:00.000Z', 'error', 'failed', { error: 'port 3000 is already in use', code: 'a=b', port: 3000 })
  expect(line).toBe('2026-01-01T00:00:00.000Z ERROR failed error="port 3000 is already in use" code="a=b" port=3000\n')
})

test('a line quoting a secret put in the wrong place shows none of it (a token, an api_key, a database password), in both formats; other fields intact', () => {
  const token = `kw2_${'0123456789abcdef'.repeat(2)}_${'A'.repeat(43)}`
  const apiKey = `kwk_${'b'.repeat(32)}`
  for (const format of ['json', 'text'] as const) {
    const lines: string[] = []
    const logger = createLogger(format, (line) => lines.push(line))
    logger.info('listening', { address: 'http://127.0.0.1:3000', data_dir: '/srv/postgres:/keyward:Sekr1t@db:5432/keyward' })
    logger.info('recovered', { data_dir: "/srv/postgres:/keyward:pa'Sekr1t@db/keyward" })
    logger.error('failed', { error: `--tls-cert ${token} holds no PEM certificate; unknown key ${apiKey}` })
    const text = lines.join('')
    for (const secret of ['Sekr1t', token.slice(4), apiKey.slice(4)]) expect(text).not.toContain(secret)
    expect(text).toContain('http://127.0.0.1:3000')
    expect(text).toContain('postgres:/keyward:***@db:5432/keyward')
    if (format === 'json') for (const line of lines) expect(() => JSON.parse(line)).not.toThrow()
  }
})
