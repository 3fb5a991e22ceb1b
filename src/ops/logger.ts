/**
 * The server's log (CONTRACT section 11; docs/operations.md "Logs"): one line per event on stderr,
 * a JSON object (`time`, `level`, `msg`, then the fields) or, with `--log-format text`, the same as
 * a readable line. Secrets never reach it: callers pass identifiers and counts, never a token, a
 * body, an api_key or a query value.
 *
 * Lines are buffered and handed to stderr once per turn of the event loop (a request line must not
 * cost a system call, nor block on a slow reader of stderr); `flush` writes what is left, and the
 * process writes it synchronously if it exits before that.
 */
import { writeSync } from 'node:fs'

export type LogFormat = 'json' | 'text'
export const LOG_FORMATS: readonly LogFormat[] = ['json', 'text']

export type LogLevel = 'info' | 'warn' | 'error'
export type LogValue = string | number | boolean | null | undefined | Readonly<Record<string, number>>
export type LogFields = Record<string, LogValue>

export interface Logger {
  info(msg: string, fields?: LogFields): void
  warn(msg: string, fields?: LogFields): void
  error(msg: string, fields?: LogFields): void
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
  if (format === 'json') return JSON.stringify({ time, level, msg, ...fields }) + '\n'
  let line = `${time} ${level.toUpperCase().padEnd(5)} ${msg}`
  if (fields) for (const key in fields) if (fields[key] !== undefined) line += ` ${key}=${textValue(fields[key]!)}`
  return line + '\n'
}

/** Buffers lines for stderr and writes them once per turn of the event loop. */
function stderrSink(): { sink: LineSink; flush(): Promise<void> } {
  const writer = Bun.stderr.writer({ highWaterMark: 64 * 1024 })
  let pending = ''
  let scheduled = false
  const write = () => {
    scheduled = false
    if (pending === '') return
    writer.write(pending)
    pending = ''
    return writer.flush()
  }
  // Whatever is still buffered when the process exits (an exit from a fatal error) is written at once.
  process.on('exit', () => {
    if (pending !== '') writeSync(2, pending)
    pending = ''
  })
  return {
    sink: (text) => {
      pending += text
      if (!scheduled) {
        scheduled = true
        setImmediate(write)
      }
    },
    flush: async () => {
      await write()
    },
  }
}

export function createLogger(format: LogFormat, sink?: LineSink): Logger {
  const out = sink ? { sink, flush: async () => {} } : stderrSink()
  const line = (level: LogLevel) => (msg: string, fields?: LogFields) => out.sink(formatLine(format, now(), level, msg, fields))
  return { info: line('info'), warn: line('warn'), error: line('error'), flush: out.flush }
}

/** A logger that keeps its entries (tests, and commands that need none). */
export function memoryLogger(): Logger & { readonly entries: { level: LogLevel; msg: string; fields: LogFields }[] } {
  const entries: { level: LogLevel; msg: string; fields: LogFields }[] = []
  const line = (level: LogLevel) => (msg: string, fields: LogFields = {}) => void entries.push({ level, msg, fields })
  return { entries, info: line('info'), warn: line('warn'), error: line('error'), flush: async () => {} }
}
