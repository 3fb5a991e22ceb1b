/**
 * The server's log (docs/operations.md "Logs"): one line per event on stderr,
 * a JSON object (`time`, `level`, `msg`, then the fields) or, with `--log-format text`, the same as
 * a readable line. Secrets never reach it: callers pass identifiers and counts, never a token, a
 * body, an api_key or a query value.
 *
 * Lines are buffered and handed to stderr in batches (log-sink.ts); `flush` writes what is left,
 * and the process writes it synchronously if it exits before that. A log that cannot be written (a
 * full disk, a reader gone) costs lines, counted, never the server: nothing here throws.
 */
import { stderrSink, type DroppedLine } from './log-sink'
import { withoutSecrets } from './redact'

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
  /**
   * Writes what is buffered; true once it is written. Waits at most `withinMs` for a reader that is
   * slow or has stopped reading (false: it is still on its way).
   */
  flush(withinMs?: number): Promise<boolean>
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

export function createLogger(format: LogFormat, sink?: LineSink): Logger {
  const droppedLine: DroppedLine = (count, error) =>
    error === undefined
      ? formatLine(format, now(), 'warn', 'log lines dropped: stderr is not read fast enough', { dropped: count })
      : formatLine(format, now(), 'warn', 'log lines dropped: stderr could not be written', { dropped: count, error })
  const out = sink ? { sink, flush: async () => true } : stderrSink(droppedLine)
  // Every line but the JSON request lines (made below, of values keyward made) without secrets: a
  // path or a flag's value quoted in a lifecycle line may be one put in the wrong place (src/ops/redact.ts).
  const line = (level: LogLevel) => (msg: string, fields?: LogFields) => out.sink(withoutSecrets(formatLine(format, now(), level, msg, fields)))
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
    flush: async () => true,
  }
}
