/**
 * Child processes of a benchmark (servers, builders, load generators): spawned through one
 * registry so that every one of them is stopped at the end, on failure and on Ctrl-C too; their
 * output kept as a bounded tail; free ports; waiting until a server answers; raw HTTP/1.1 to
 * compare the bytes two servers put on the wire.
 */
import { connect } from 'node:net'
import type { Subprocess } from 'bun'

type SpawnOptions = Parameters<typeof Bun.spawn>[1]

export class Children {
  private readonly procs = new Set<Subprocess>()

  /** Bun.spawn, remembered until it exits or is stopped. */
  spawn(cmd: string[], options: SpawnOptions = {}): Subprocess {
    const proc = Bun.spawn(cmd, options)
    this.procs.add(proc)
    void proc.exited.then(() => this.procs.delete(proc))
    return proc
  }

  /**
   * Sends `signal` (default SIGTERM), then SIGKILL after `graceMs`; resolves once it has exited.
   * `graceMs` 0 or signal SIGKILL: killed at once.
   */
  async stop(proc: Subprocess, { signal = 'SIGTERM', graceMs = 5000 }: { signal?: NodeJS.Signals; graceMs?: number } = {}): Promise<void> {
    if (proc.exitCode === null && proc.signalCode === null) {
      proc.kill(graceMs > 0 ? signal : 'SIGKILL')
      const timer = graceMs > 0 && signal !== 'SIGKILL' ? setTimeout(() => proc.kill('SIGKILL'), graceMs) : undefined
      await proc.exited
      if (timer) clearTimeout(timer)
    }
    this.procs.delete(proc)
  }

  /** Stops every child still running, all at once. */
  async stopAll(options: { signal?: NodeJS.Signals; graceMs?: number } = {}): Promise<void> {
    await Promise.all([...this.procs].map((proc) => this.stop(proc, options)))
  }
}

/** A process that has not exited yet. */
export const running = (proc: Subprocess | null | undefined): proc is Subprocess => !!proc && proc.exitCode === null && proc.signalCode === null

/**
 * What a child writes on a pipe, kept as its last `keep` characters, and lines matched against
 * patterns a caller watches for. A server may log a line per request (tens of thousands a second):
 * a file would grow by gigabytes over a benchmark, and splitting every chunk into lines would cost
 * this process CPU inside the measurements, so lines are split only while someone watches.
 */
export class ProcessLog {
  private tail = ''
  private partial = ''
  private readonly watchers = new Set<{ pattern: RegExp; found: RegExpExecArray | null }>()
  readonly drained: Promise<void>

  constructor(stream: ReadableStream<Uint8Array> | number | undefined | null, private readonly keep = 16_384) {
    this.drained = stream instanceof ReadableStream ? this.pump(stream) : Promise.resolve()
  }

  private async pump(stream: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder()
    for await (const chunk of stream) {
      const text = decoder.decode(chunk, { stream: true })
      this.tail = (this.tail + text).slice(-this.keep)
      if (this.watchers.size === 0) continue
      const lines = (this.partial + text).split('\n')
      this.partial = lines.pop()!.slice(-this.keep)
      for (const line of lines) for (const watch of this.watchers) watch.found ??= watch.pattern.exec(line)
    }
  }

  /** The last characters written (the whole output when it was short). */
  text(): string {
    return this.tail
  }

  /** The first line matching `pattern` from now on (null until there is one); `stop` ends the watch. */
  watch(pattern: RegExp): { readonly found: () => RegExpExecArray | null; readonly stop: () => void } {
    const watch = { pattern, found: null as RegExpExecArray | null }
    this.partial = ''
    this.watchers.add(watch)
    return { found: () => watch.found, stop: () => void this.watchers.delete(watch) }
  }
}

/**
 * On Ctrl-C or SIGTERM: run `cleanup` (stop children, remove temp files and databases), then exit
 * 130. A second signal during the cleanup is ignored: it would leave children behind.
 */
export function onInterrupt(cleanup: () => Promise<unknown>): void {
  let cleaning = false
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (cleaning) return
      cleaning = true
      console.error(`\n${signal}: stopping the servers and removing temp files...`)
      void cleanup()
        .catch((error) => console.error(`cleanup: ${(error as Error)?.message ?? error}`))
        .finally(() => process.exit(130))
    })
  }
}

/** A port nothing listens on right now (bound, read, released). */
export async function freePort(): Promise<number> {
  const probe = Bun.serve({ hostname: '127.0.0.1', port: 0, fetch: () => new Response() })
  const port = probe.port!
  await probe.stop(true)
  return port
}

/**
 * Polls `url` until it answers 2xx (`accept` may judge otherwise); fails fast if the process
 * exits, and after `timeoutMs`. `log` gives the process's output for the error message.
 */
export async function waitReady(
  name: string,
  proc: Subprocess,
  url: string,
  options: { timeoutMs?: number; intervalMs?: number; log?: () => string; accept?: (response: Response) => boolean } = {},
): Promise<void> {
  const { timeoutMs = 15_000, intervalMs = 20 } = options
  const deadline = Date.now() + timeoutMs
  const logText = () => options.log?.() ?? ''
  while (Date.now() < deadline) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`${name} exited (${proc.exitCode ?? proc.signalCode}) before it was ready:\n${logText()}`)
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(1000) })
      await response.arrayBuffer()
      if (options.accept ? options.accept(response) : response.ok) return
    } catch {
      // not listening yet
    }
    await Bun.sleep(intervalMs)
  }
  throw new Error(`${name} did not answer ${url} within ${timeoutMs / 1000}s:\n${logText()}`)
}

/** The first line of a message, bounded, for one-line reports. */
export const firstLine = (text: string) => text.trim().split('\n')[0]!.slice(0, 300)

// --- raw HTTP, to compare the bytes on the wire --------------------------------------------------

/** One GET over a fresh connection; the whole answer as text, headers included. */
export function rawGet(port: number, path: string, authorization?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let text = ''
    socket.setEncoding('utf8')
    socket.setTimeout(5000, () => socket.destroy(new Error('raw GET timed out')))
    socket.on('data', (chunk) => (text += chunk))
    socket.on('end', () => resolve(text))
    socket.on('error', reject)
    const auth = authorization ? `Authorization: ${authorization}\r\n` : ''
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${auth}Connection: close\r\n\r\n`)
  })
}

export interface CannedResponse {
  readonly status: number
  /** Headers Bun does not add itself (Date, Content-Length, Connection are left out). */
  readonly headers: [string, string][]
  readonly body: string
}

/** Status, headers Bun does not add itself, and body of a raw HTTP/1.1 answer. */
export function parseResponse(raw: string): CannedResponse {
  const split = raw.indexOf('\r\n\r\n')
  const [statusLine, ...headerLines] = raw.slice(0, split).split('\r\n')
  const headers = headerLines
    .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()] as [string, string])
    .filter(([name]) => !['date', 'content-length', 'connection'].includes(name.toLowerCase()))
  return { status: Number(statusLine!.split(' ')[1]), headers, body: raw.slice(split + 4) }
}

/**
 * Masks what differs per request: the Date header, the trace id (header and body) and rate limit
 * headers (their counts move with every request).
 */
export function normaliseResponse(raw: string): string {
  const traceId = /^x-trace-id: (.*)$/im.exec(raw)?.[1]?.trim()
  const masked = traceId ? raw.split(traceId).join('<trace-id>') : raw
  // Rate-limit headers (only with `--rate-limit` on: bench/run.ts) are left out: the ladder's steps do not limit.
  return masked.replace(/^Date: .*$/im, 'Date: <date>').replace(/^ratelimit[\w-]*: .*\r?\n/gim, '')
}
