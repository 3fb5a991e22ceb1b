/**
 * Where the log's lines go (docs/operations.md "Logs"): batched (a request line must not cost a
 * system call, nor block on a slow reader of stderr), bounded while stderr is read too slowly
 * (lines beyond are dropped and counted), and written to stderr without ever blocking the event
 * loop on a pipe. Nothing here throws: a log that cannot be written costs lines, never the server.
 */
import { fstatSync, write as writeAsync, writeSync } from 'node:fs'
import { isatty } from 'node:tty'
import { settledWithin } from './deadline'
import type { LineSink } from './logger'

/** Lines are written at most this long after they were logged, or once this many characters wait. */
const FLUSH_AFTER_MS = 20
const FLUSH_AT_CHARS = 64 * 1024
/** Characters of lines held while stderr is read too slowly; lines beyond are dropped and counted. */
export const MAX_WAITING_CHARS = 4 * 1024 * 1024

/** What a write did: the bytes written, and the error (a code such as `ENOSPC`) that stopped it short. */
export interface Written {
  readonly bytes: number
  readonly error?: string
}

/**
 * Where batches go (`fdWriter`): writes all of `bytes`, or up to a failure, which it reports and
 * never throws. A promise while a pipe takes them (its reader is slow).
 */
export interface BatchWriter {
  write(bytes: Uint8Array): Written | Promise<Written>
}

/** Why lines were dropped, for their count's line: undefined while stderr is only read too slowly. */
export type DroppedLine = (count: number, error: string | undefined) => string

const NEWLINE = 10

/** The whole lines in `bytes` (its newlines). */
function linesIn(bytes: Uint8Array): number {
  let lines = 0
  for (let at = bytes.indexOf(NEWLINE); at !== -1; at = bytes.indexOf(NEWLINE, at + 1)) lines++
  return lines
}

/** A batch on its way: the rest of a cut line (`tailFirst`), lines, and the line counting `reporting` lost ones. */
interface Outgoing {
  readonly parts: Uint8Array[]
  readonly tailFirst: boolean
  readonly count: Uint8Array | undefined
  readonly reporting: number
}

/** Bytes of one batch buffer; text longer than a third of it gets a buffer of its own size. */
const BATCH_BYTES = 128 * 1024

/**
 * Lines are joined into one string until it holds this many characters, then encoded together: one
 * encoding per few dozen lines rather than per line, which cost a read by id about a microsecond.
 */
const ENCODE_AT_CHARS = 16 * 1024

/**
 * Lines wait here and go to the writer together, FLUSH_AFTER_MS after the first of them or once
 * they hold FLUSH_AT_CHARS: never a system call per line (Bun's writer for a pipe writes each
 * `write` at once). Lines are encoded into the batch's bytes every ENCODE_AT_CHARS, so at most that
 * much waits as strings (strings waiting for a batch grew the heap under a flood of requests:
 * docs/abuse.md). While a batch is still on its way (the reader of stderr is slow) the next one
 * waits, so the event loop never blocks on the pipe, and what waits is bounded: over
 * `maxWaitingChars` lines are dropped, and a line says how many (docs/operations.md, "Logs").
 */
export function batchedSink(writer: BatchWriter, droppedLine: DroppedLine, maxWaitingChars = MAX_WAITING_CHARS) {
  const encoder = new TextEncoder()
  /**
   * Buffers the writer has finished with, filled again by later batches: a fresh 128 KiB buffer per
   * batch cost a read by id more than its line did (zeroed, then collected; README "Operating keyward").
   */
  const spare: Uint8Array[] = []
  const freshBuffer = (bytes: number) => (bytes <= BATCH_BYTES ? (spare.pop() ?? new Uint8Array(BATCH_BYTES)) : new Uint8Array(bytes))
  /** Full buffers of this batch, then the one being filled up to `filled`. */
  let full: Uint8Array[] = []
  let buffer = freshBuffer(BATCH_BYTES)
  let filled = 0
  /** Lines not yet encoded, and the characters of every line waiting (encoded or not). */
  let joined = ''
  let chars = 0
  /** Lines lost and not yet reported in a line of their own, and the last write error among the causes. */
  let dropped = 0
  let failure: string | undefined
  /**
   * The rest of a line that a failed write cut: written first once writes succeed again, so that
   * the log stays whole lines (the next line glued to half of one is not JSON).
   */
  let tail: Uint8Array | undefined
  let timer: ReturnType<typeof setTimeout> | undefined
  let draining: Promise<unknown> | undefined
  const schedule = () => void (timer ??= setTimeout(write, FLUSH_AFTER_MS))
  const append = (text: string) => {
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (filled + text.length * 3 > buffer.length) {
      if (filled > 0) full.push(buffer.subarray(0, filled))
      else recycle([buffer])
      buffer = freshBuffer(text.length * 3)
      filled = 0
    }
    filled += encoder.encodeInto(text, buffer.subarray(filled)).written
  }
  const encodeJoined = () => {
    if (joined.length === 0) return
    append(joined)
    joined = ''
  }
  /** This batch's bytes, handed over: the writer may keep them while it drains. */
  const takeBatch = (): Uint8Array[] => {
    encodeJoined()
    const batch = filled > 0 ? [...full, buffer.subarray(0, filled)] : full
    full = []
    if (filled > 0) buffer = freshBuffer(BATCH_BYTES)
    filled = 0
    chars = 0
    return batch
  }
  /** Takes back the standard-size buffers of a batch the writer is done with (two are enough to alternate). */
  function recycle(batch: readonly Uint8Array[]): void {
    for (const bytes of batch) if (bytes.buffer.byteLength === BATCH_BYTES && spare.length < 2) spare.push(new Uint8Array(bytes.buffer))
  }
  /** What waits, with the rest of a cut line first and the count of the lines lost last. */
  const takeOutgoing = (): Outgoing => {
    const parts = takeBatch()
    const tailFirst = tail !== undefined
    if (tail) parts.unshift(tail)
    tail = undefined
    const count = dropped > 0 ? encoder.encode(droppedLine(dropped, failure)) : undefined
    if (count) parts.push(count)
    return { parts, tailFirst, count, reporting: dropped }
  }
  /**
   * Notes how the write of `parts[index]` went; false when it failed: the rest of the line it cut
   * is kept (`tail`), and the whole lines after it, in it and in the rest of the batch, are dropped
   * (the count's own line aside: its count stays to be reported).
   */
  function wrote(out: Outgoing, index: number, result: Written): boolean {
    const bytes = out.parts[index]!
    if (result.error === undefined) {
      if (bytes === out.count && (dropped -= out.reporting) === 0) failure = undefined
      return true
    }
    failure = result.error
    let from = result.bytes
    if (from > 0 ? bytes[from - 1] !== NEWLINE : index === 0 && out.tailFirst) {
      const cut = bytes.indexOf(NEWLINE, from)
      const end = cut === -1 ? bytes.length : cut + 1
      tail = bytes.slice(from, end)
      from = end
      if (bytes === out.count) dropped -= out.reporting
    }
    if (bytes !== out.count) dropped += linesIn(bytes.subarray(from))
    for (const part of out.parts.slice(index + 1)) if (part !== out.count) dropped += linesIn(part)
    return false
  }
  /** Writes the parts in turn from `index`: a promise while one is on its way. */
  function writeParts(out: Outgoing, index: number): Promise<void> | undefined {
    for (let i = index; i < out.parts.length; i++) {
      const result = writer.write(out.parts[i]!)
      if (result instanceof Promise) return result.then((written) => (wrote(out, i, written) ? writeParts(out, i + 1) : undefined))
      if (!wrote(out, i, result)) return undefined
    }
    return undefined
  }
  /** Hands what waits to the writer, unless a batch is still draining (then tries again later). */
  function write(): void {
    clearTimeout(timer)
    timer = undefined
    if (draining) return schedule()
    const out = takeOutgoing()
    if (out.parts.length === 0) return
    const writing = writeParts(out, 0)
    // Until the writer has written them all, it may still read the batch's buffers.
    if (writing) draining = writing.finally(() => ((draining = undefined), recycle(out.parts)))
    else recycle(out.parts)
  }
  return {
    sink: (text: string) => {
      if (chars + text.length > maxWaitingChars) {
        dropped++
        return
      }
      joined += text
      chars += text.length
      if (joined.length >= ENCODE_AT_CHARS) encodeJoined()
      if (chars >= FLUSH_AT_CHARS) write()
      else schedule()
    },
    /**
     * Writes everything waiting, and resolves true once the writer has taken it; false if that
     * takes longer than `withinMs` (the reader of stderr has stopped reading).
     */
    flush: async (withinMs = Infinity): Promise<boolean> => {
      const deadline = performance.now() + withinMs
      const drained = async () => {
        while (draining) {
          const left = deadline - performance.now()
          if (left <= 0 || !(await settledWithin(draining, left))) return false
        }
        return true
      }
      // Handed over at once when nothing is on its way (no await before it: a caller may look right after).
      if (draining && !(await drained())) return false
      write()
      return drained()
    },
    /**
     * What waits, unwritten (the process is exiting: written synchronously); nothing while a batch
     * is still on its way: its reader has stopped reading, and a write now could block the exit.
     */
    takeWaiting: (): Uint8Array => {
      if (draining) return new Uint8Array(0)
      const out = takeOutgoing()
      dropped = 0
      const bytes = Buffer.concat(out.parts)
      recycle(out.parts)
      return bytes
    },
  }
}

const errorCode = (error: unknown) => (error as NodeJS.ErrnoException).code ?? String(error)

/**
 * Writes to the file descriptor `fd` (stderr): at once to a file or a device such as /dev/null,
 * which take bytes without waiting on anyone; through Bun's thread pool to a pipe, a socket or a
 * terminal, whose reader may be slow or stopped (a terminal after Ctrl-S, or nobody's), so that the
 * event loop never waits on it. Bun's own writer for stderr (a FileSink) reported a failed write
 * (ENOSPC, EPIPE) as an uncaught error, which made the process exit 1 at its end.
 */
export function fdWriter(fd: number): BatchWriter {
  let waitsOnReader = false
  try {
    const info = fstatSync(fd)
    waitsOnReader = info.isFIFO() || info.isSocket() || isatty(fd)
  } catch {
    // Not open (EBADF): every write will fail, and be counted.
  }
  const later = (bytes: Uint8Array, done: number): Promise<Written> =>
    new Promise((resolve) => {
      writeAsync(fd, bytes, done, bytes.length - done, null, (error, written) => {
        // A non-blocking pipe that is full: the same bytes a little later.
        if (error && errorCode(error) === 'EAGAIN') setTimeout(() => resolve(later(bytes, done)), FLUSH_AFTER_MS)
        else if (error) resolve({ bytes: done, error: errorCode(error) })
        else if (done + written < bytes.length) resolve(later(bytes, done + written))
        else resolve({ bytes: bytes.length })
      })
    })
  if (waitsOnReader) return { write: (bytes) => later(bytes, 0) }
  return {
    write: (bytes) => {
      let done = 0
      try {
        while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done)
        return { bytes: done }
      } catch (error) {
        return errorCode(error) === 'EAGAIN' ? later(bytes, done) : { bytes: done, error: errorCode(error) }
      }
    },
  }
}

export function stderrSink(droppedLine: DroppedLine): { sink: LineSink; flush(withinMs?: number): Promise<boolean> } {
  const batches = batchedSink(fdWriter(2), droppedLine)
  // What is still waiting when the process exits (an exit from a fatal error) is written then, if it can be.
  process.on('exit', () => {
    const bytes = batches.takeWaiting()
    try {
      if (bytes.length > 0) writeSync(2, bytes)
    } catch {}
  })
  return { sink: batches.sink, flush: batches.flush }
}
