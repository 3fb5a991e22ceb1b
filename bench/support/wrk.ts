/**
 * Running wrk, the HTTP load generator, and reading its answer. Works with any wrk script; a
 * script that ends with the `done()` of bench/run-get.lua (a `wrk-stats:` line) also gives exact
 * counts, p99.9 and max latency.
 */
import { cpus } from 'node:os'
import type { Subprocess } from 'bun'

/** wrk and the server share the machine: give wrk about half the cores. */
export const WRK_THREADS = Math.max(1, Math.floor(cpus().length / 2))

export interface WrkResult {
  /** Measured duration, seconds. */
  readonly seconds: number
  readonly rps: number
  /** Requests answered within the run. */
  readonly requests: number
  readonly meanMs: number
  readonly p99Ms: number
  /** From a `wrk-stats:` line only (NaN otherwise). */
  readonly p999Ms: number
  readonly maxMs: number
  /** Answers with status ≥ 400 (wrk's "Non-2xx or 3xx responses"). */
  readonly non2xx: number
  /** Requests that got no answer within wrk's --timeout. */
  readonly timeouts: number
  /** connect + read + write errors. */
  readonly socketErrors: number
  /** Everything wrk printed, for scripts that print their own lines. */
  readonly output: string
}

export function findWrk(): string | null {
  return Bun.which('wrk')
}

export function wrkMissing(program: string): string {
  return (
    `${program} needs wrk, the HTTP load generator, on the PATH. Install it with:\n\n` +
    `  apt-get update && apt-get install -y wrk      (Debian, Ubuntu)\n` +
    `  brew install wrk                              (macOS)\n`
  )
}

export interface WrkOptions {
  readonly env?: Record<string, string | undefined>
  /** wrk --timeout, seconds (wrk's own default is 2). */
  readonly timeoutSeconds?: number
  /** Threads; default WRK_THREADS, never more than connections. */
  readonly threads?: number
  /** How to start the process (e.g. a Children registry's spawn, so Ctrl-C stops it); default Bun.spawn. */
  readonly spawn?: (cmd: string[], options: Parameters<typeof Bun.spawn>[1]) => Subprocess
}

export interface RunningWrk {
  readonly proc: Subprocess
  /** Ends the run now (SIGINT: wrk stops and still reports what it measured). */
  stop(): void
  readonly result: Promise<WrkResult>
}

/** Starts wrk with `args` (which must include -d and -c); the result arrives when it ends. */
export function startWrk(wrk: string, args: readonly string[], options: WrkOptions = {}): RunningWrk {
  const connections = Number(args[args.indexOf('-c') + 1])
  const threads = Math.max(1, Math.min(options.threads ?? WRK_THREADS, Number.isFinite(connections) ? connections : 1))
  const timeout = options.timeoutSeconds !== undefined ? ['--timeout', `${options.timeoutSeconds}s`] : []
  const spawn = options.spawn ?? Bun.spawn
  const proc = spawn([wrk, `-t${threads}`, ...timeout, ...args], { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe', env: options.env ?? process.env })
  const result = (async () => {
    const [out, err, code] = await Promise.all([
      new Response(proc.stdout as ReadableStream).text(),
      new Response(proc.stderr as ReadableStream).text(),
      proc.exited,
    ])
    if (code !== 0 || !/Requests\/sec:/.test(out)) {
      throw new Error(`wrk failed (exit ${code}): ${(err || out).trim().split('\n').at(-1) ?? ''} (wrk ${args.join(' ')})\n${out}${err}`)
    }
    return parseWrk(out)
  })()
  return { proc, stop: () => proc.kill('SIGINT'), result }
}

/** wrk's text output (and a `wrk-stats:` line if the script printed one) → figures. */
export function parseWrk(out: string): WrkResult {
  const stats = /wrk-stats: (.*)/.exec(out)?.[1]
  const field = (name: string) => {
    const match = stats ? new RegExp(`\\b${name}=([\\d.]+)`).exec(stats) : null
    return match ? Number(match[1]) : NaN
  }
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  const latency = /^\s+Latency\s+(\S+)/m.exec(out)?.[1]
  const p99 = /^\s+99%\s+(\S+)/m.exec(out)?.[1]
  const textRequests = Number(/(\d+) requests in/.exec(out)?.[1] ?? 0)
  const textSeconds = toMs(/requests in ([\d.]+\w+),/.exec(out)?.[1] ?? '') / 1000
  const requests = stats ? field('requests') : textRequests
  const seconds = stats ? field('duration_us') / 1e6 : textSeconds
  return {
    seconds,
    requests,
    // wrk's own figure unless the script reported exact counts (a run stopped early has no other).
    rps: stats ? (seconds > 0 ? requests / seconds : 0) : Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? 0),
    meanMs: stats ? field('mean_us') / 1000 : latency ? toMs(latency) : NaN,
    p99Ms: stats ? field('p99_us') / 1000 : p99 ? toMs(p99) : NaN,
    p999Ms: field('p999_us') / 1000,
    maxMs: field('max_us') / 1000,
    non2xx: stats ? field('status') : Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(out)?.[1] ?? 0),
    timeouts: stats ? field('timeout') : Number(socket?.[4] ?? 0),
    socketErrors: stats ? field('connect') + field('read') + field('write') : socket ? Number(socket[1]) + Number(socket[2]) + Number(socket[3]) : 0,
    output: out,
  }
}

/** wrk's `635.91us`, `1.23ms`, `2.01s`, `1.50m`, `1.00h` → milliseconds (NaN if not such a text). */
export function toMs(text: string): number {
  const match = /^([\d.]+)(us|ms|s|m|h)$/.exec(text)
  if (!match) return NaN
  const value = Number(match[1])
  return value * { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[match[2] as 'us' | 'ms' | 's' | 'm' | 'h']
}

/** 0.35 → "350 µs", 12.3 → "12.30 ms", 2500 → "2.50 s". */
export function formatMs(value: number): string {
  if (!Number.isFinite(value)) return '–'
  if (value < 1) return `${(value * 1000).toFixed(0)} µs`
  if (value < 1000) return `${value.toFixed(2)} ms`
  return `${(value / 1000).toFixed(2)} s`
}
