/**
 * The server's log (docs/operations.md "Logs"): one line per event on stderr,
 * a JSON object (`time`, `level`, `msg`, then the fields) or, with `--log-format text`, the same as
 * a readable line. Secrets never reach it: callers pass identifiers and counts, never a token, a
 * body, an api_key or a query value.
 *
 * Lines are buffered and handed to stderr in batches (a request line must not cost a system call,
 * nor block on a slow reader of stderr); `flush` writes what is left, and the process writes it
 * synchronously if it exits before that.
 */

import { writeSync } from 'node:fs'

export type LogFormat = 'json' | 'text'
export const LOG_FORMATS: readonly LogFormat[] = ['json', 'text']

export type LogLevel = 'info' | 'warn' | 'error'
export type LogValue = string | number | boolean | null | undefined | Readonly<Record<string, number>>
export type LogFields = Record<string, LogValue>

/**
 * Writes the `request` line of one request to a route (docs/operations.md), its method and route
 * template (or `unmatched`) fixed; `organizationId` and `tokenId` when the request had a valid token.
 * Positional, with no object per line: it runs on every request.
 */
export type RequestLineWriter = (
  status: number,
  durationMs: number,
  traceId: string | undefined,
  organizationId: string | undefined,
  tokenId: string | undefined,
  bytesOut: number,
) => void

export interface Logger {
  info(msg: string, fields?: LogFields): void
  warn(msg: string, fields?: LogFields): void
  error(msg: string, fields?: LogFields): void
  /** The writer of the `request` lines (info) of `method` requests to `route`: made once per route, used on every request. */
  requests(method: string, route: string): RequestLineWriter
  /** Writes what is buffered. */
  flush(): Promise<void>
}

/** Where finished lines go: stderr by default; tests collect them. */
export type LineSink = (text: string) => void

let lastMillis = -1
let lastTime = ''
/** RFC 3339 in UTC with milliseconds; reused within a millisecond (many request lines share one). */
function now(): string {
  const millis = Date.now()
  if (millis !== lastMillis) {
    lastMillis = millis
    lastTime = new Date(millis).toISOString()
  }
  return lastTime
}

/** A field's value in a text line: bare when it is a plain word, else quoted as JSON. */
const textValue = (value: Exclude<LogValue, undefined>) =>
  typeof value === 'string' && /^[\w.:/@+-]+$/.test(value) ? value : JSON.stringify(value)

export function formatLine(format: LogFormat, time: string, level: LogLevel, msg: string, fields: LogFields | undefined): string {
  if (format === 'json') {
    // One stringify of the fields, spliced in after the fixed keys (no copy of `fields` per line).
    const rest = fields ? JSON.stringify(fields) : '{}'
    return `{"time":"${time}","level":"${level}","msg":${JSON.stringify(msg)}${rest.length > 2 ? `,${rest.slice(1)}` : '}'}\n`
  }
  let line = `${time} ${level.toUpperCase().padEnd(5)} ${msg}`
  if (fields) for (const key in fields) if (fields[key] !== undefined) line += ` ${key}=${textValue(fields[key]!)}`
  return line + '\n'
}

/** Lines are written at most this long after they were logged, or once this many characters wait. */
const FLUSH_AFTER_MS = 20
const FLUSH_AT_CHARS = 64 * 1024
/** Characters of lines held while stderr is read too slowly; lines beyond are dropped and counted. */
export const MAX_WAITING_CHARS = 4 * 1024 * 1024

/** Where batches go: Bun's writer for stderr (a FileSink); `flush` is a promise while the pipe is full. */
export interface BatchWriter {
  write(bytes: Uint8Array): unknown
  flush(): unknown
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
export function batchedSink(writer: BatchWriter, droppedLine: (count: number) => string, maxWaitingChars = MAX_WAITING_CHARS) {
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
  let dropped = 0
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
  /** Hands what waits to the writer, unless a batch is still draining (then tries again later). */
  function write(): void {
    clearTimeout(timer)
    timer = undefined
    if (draining) return schedule()
    if (dropped > 0) {
      encodeJoined()
      append(droppedLine(dropped))
      dropped = 0
    }
    const batch = takeBatch()
    if (batch.length === 0) return
    for (const bytes of batch) writer.write(bytes)
    const flushed = writer.flush()
    // Until the writer has written them all, it may still read the batch's buffers.
    if (flushed instanceof Promise) draining = flushed.finally(() => ((draining = undefined), recycle(batch)))
    else recycle(batch)
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
    /** Writes everything waiting, and resolves once the writer has taken it. */
    flush: async () => {
      while (draining) await draining
      write()
      while (draining) await draining
    },
    /** What waits, unwritten (the process is exiting: written synchronously). */
    takeWaiting: (): Uint8Array => {
      encodeJoined()
      if (dropped > 0) append(droppedLine(dropped))
      dropped = 0
      const batch = takeBatch()
      const bytes = Buffer.concat(batch)
      recycle(batch)
      return bytes
    },
  }
}

function stderrSink(droppedLine: (count: number) => string): { sink: LineSink; flush(): Promise<void> } {
  const batches = batchedSink(Bun.stderr.writer(), droppedLine)
  // What is still waiting when the process exits (an exit from a fatal error) is written then.
  process.on('exit', () => {
    const bytes = batches.takeWaiting()
    if (bytes.length > 0) writeSync(2, bytes)
  })
  return { sink: batches.sink, flush: batches.flush }
}

export function createLogger(format: LogFormat, sink?: LineSink): Logger {
  const droppedLine = (count: number) => formatLine(format, now(), 'warn', 'log lines dropped: stderr is not read fast enough', { dropped: count })
  const out = sink ? { sink, flush: async () => {} } : stderrSink(droppedLine)
  const line = (level: LogLevel) => (msg: string, fields?: LogFields) => out.sink(formatLine(format, now(), level, msg, fields))
  const requests = (method: string, route: string): RequestLineWriter => {
    if (format === 'text') return (...values) => line('info')('request', requestFields(method, route, ...values))
    // What follows the time, made once per route. Every other value is one keyward made (numbers,
    // UUIDs) and needs no quoting; the method and route go through JSON.stringify, which escapes them.
    const head = `","level":"info","msg":"request","method":${JSON.stringify(method)},"route":${JSON.stringify(route)},"status":`
    return (status, durationMs, traceId, organizationId, tokenId, bytesOut) =>
      out.sink(
        `{"time":"${now()}${head}${status},"duration_ms":${durationMs}${traceId === undefined ? '' : `,"trace_id":"${traceId}"`}` +
          `${organizationId === undefined ? '' : `,"organization_id":"${organizationId}","token_id":"${tokenId}"`},"bytes_out":${bytesOut}}\n`,
      )
  }
  return { info: line('info'), warn: line('warn'), error: line('error'), requests, flush: out.flush }
}

function requestFields(method: string, route: string, ...[status, durationMs, traceId, organizationId, tokenId, bytesOut]: Parameters<RequestLineWriter>): LogFields {
  return { method, route, status, duration_ms: durationMs, trace_id: traceId, organization_id: organizationId, token_id: tokenId, bytes_out: bytesOut }
}

/** A logger that keeps its entries (tests, and commands that need none). */
export function memoryLogger(): Logger & { readonly entries: { level: LogLevel; msg: string; fields: LogFields }[] } {
  const entries: { level: LogLevel; msg: string; fields: LogFields }[] = []
  const line = (level: LogLevel) => (msg: string, fields: LogFields = {}) => void entries.push({ level, msg, fields })
  return {
    entries,
    info: line('info'),
    warn: line('warn'),
    error: line('error'),
    requests: (method, route) => (...values) => line('info')('request', requestFields(method, route, ...values)),
    flush: async () => {},
  }
}
