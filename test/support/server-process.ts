/**
 * The real CLI as a child process, for the process tests and the crash-loop bench: start `serve` on
 * a data dir with `--port 0` and rate limits off, wait for its `listening` log line on stderr (its
 * `address`), talk to it over HTTP, stop it with a signal.
 */
import { resolve } from 'node:path'
import type { Subprocess } from 'bun'
import { acquireDataDirLock, DataDirLockedError } from '../../src/store/lock'

export const ROOT = resolve(import.meta.dir, '../..')

/** Bounds every wait for a process; generous, only reached when something is broken. */
export const DEADLINE_MS = 15000

/** The environment without KEYWARD_* settings, so the developer's own cannot leak into a test. */
export const baseEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('KEYWARD_'))) as Record<string, string>

/** `bun run src/main.ts <args>`, by the running bun's own path. */
export const keywardCommand = (args: string[]) => [process.execPath, 'run', 'src/main.ts', ...args]

/**
 * Runs `command` with SIGXFSZ ignored and a file-size limit of `kib` KiB (bash's `ulimit -f` counts
 * 1024-byte blocks): a write past the limit then fails with EFBIG instead of killing the process.
 */
export const underFileSizeLimit = (kib: number, command: string[]) => [
  'bash',
  '-c',
  `trap "" XFSZ; ulimit -f ${kib}; exec "$@"`,
  'bash',
  ...command,
]

/**
 * Runs `command` as PID 1 of a new PID namespace, as a container would (needs root). Only SIGKILL
 * stops it: the wrapper ignores SIGTERM and SIGINT, and its death kills the command (--kill-child).
 */
export const inNewPidNamespace = (command: string[]) => ['unshare', '--pid', '--fork', '--kill-child', ...command]

/** Whether this machine lets us run a command in a new PID namespace (see inNewPidNamespace). */
export const canUsePidNamespaces = () => Bun.spawnSync(inNewPidNamespace(['true']), { stderr: 'ignore' }).exitCode === 0

/** Whether some process holds the data dir lock (tried by taking it, and giving it back). */
export function isDataDirLocked(dir: string): boolean {
  try {
    acquireDataDirLock(dir).release()
    return false
  } catch (error) {
    if (error instanceof DataDirLockedError) return true
    throw error
  }
}

export interface Result {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * Runs a command to its end (for starts that are expected to fail, and one-shot commands); `env` is
 * added to the environment (KEYWARD_* settings). One that should exit but serves instead (a refusal
 * that did not happen) is stopped after 20 s, so the test fails on its exit code and output, not on
 * its timeout.
 */
export async function run(command: string[], env: Record<string, string> = {}): Promise<Result> {
  const proc = Bun.spawn(command, { cwd: ROOT, env: { ...baseEnv, ...env }, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe', timeout: 20_000 })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  return { code, stdout, stderr }
}

/** `keyward <args>` run to its end (`run`), as the tests' processes run it. */
export const keyward = (args: string[], env: Record<string, string> = {}) => run(keywardCommand(args), env)

/** The user `nobody` (its uid and gid), whom `keywardAsNobody` runs as. */
export const NOBODY = 65534

/** Whether `keywardAsNobody` can run here: as root, with util-linux's `setpriv`. */
export const canRunAsNobody = process.getuid!() === 0 && Bun.which('setpriv') !== null

/** `keyward <args>` run as `nobody`, to its end: for what a user other than a dir's owner meets. */
export const keywardAsNobody = (args: string[]) => run(['setpriv', `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', ...keywardCommand(args)])

export interface ServerProcess {
  readonly proc: Subprocess<'ignore', 'pipe', 'pipe'>
  readonly url: string
  readonly stdout: { text: string }
  readonly stderr: { text: string }
  /** Resolves once both streams are drained (the process has exited). */
  readonly drained: Promise<unknown>
}

/** Reads a stream into `sink.text` as it arrives. */
function collect(stream: ReadableStream<Uint8Array>, sink: { text: string }): Promise<void> {
  return (async () => {
    const decoder = new TextDecoder()
    for await (const chunk of stream) sink.text += decoder.decode(chunk, { stream: true })
  })()
}

/** Polls `condition` (a check, or a query or request that answers one) until it holds; throws once the deadline passes or `proc` exits first. */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, proc?: Subprocess): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS
  while (!(await condition())) {
    if (proc?.exitCode !== null && proc?.exitCode !== undefined) throw new Error(`process exited (${proc.exitCode}) while waiting for ${what}`)
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await Bun.sleep(5)
  }
}

export interface ServeOptions {
  /** Wraps the command line, e.g. underFileSizeLimit. */
  readonly wrap?: (command: string[]) => string[]
  /** Added to the environment (KEYWARD_* settings). */
  readonly env?: Record<string, string>
  /** Requests per second per token or address; default 0 (`--rate-limit 0`, no limits) unless `env` sets one. */
  readonly rateLimit?: number
}

/** The start-up line, as JSON (the default) or text (`--log-format text`). */
const LISTENING = /"msg":"listening".*?"address":"(https?:\/\/[^"]+)"|\blistening address=(https?:\/\/\S+)/

/** Every server spawned here: killServers() ends those still running, e.g. after a failed test. */
const spawned = new Set<ServerProcess['proc']>()

export async function killServers(): Promise<void> {
  for (const proc of spawned) {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
    await proc.exited
  }
  spawned.clear()
}

/** Where a server keeps its data: a data dir, or a database (database mode). */
export type ServerStore = string | { readonly databaseUrl: string }

const storeArgs = (store: ServerStore) => (typeof store === 'string' ? ['--data', store] : ['--database-url', store.databaseUrl])

/** Spawns `serve --data <data> --port 0` (or `--database-url`) without waiting for it; `url` stays empty. */
export function spawnServer(store: ServerStore, options: ServeOptions = {}): ServerProcess {
  const limit = options.rateLimit ?? (options.env?.KEYWARD_RATE_LIMIT === undefined ? 0 : undefined)
  const command = keywardCommand(['serve', ...storeArgs(store), '--port', '0', ...(limit === undefined ? [] : ['--rate-limit', String(limit)])])
  const proc = Bun.spawn(options.wrap ? options.wrap(command) : command, {
    cwd: ROOT,
    env: { ...baseEnv, ...options.env },
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
  })
  spawned.add(proc)
  const stdout = { text: '' }
  const stderr = { text: '' }
  const drained = Promise.all([collect(proc.stdout, stdout), collect(proc.stderr, stderr)])
  return { proc, stdout, stderr, drained, url: '' }
}

/** Starts `serve --data <data> --port 0` (or `--database-url`) and resolves once it listens; a start that fails rejects with its stderr. */
export async function startServer(store: ServerStore, options: ServeOptions = {}): Promise<ServerProcess> {
  const server = spawnServer(store, options)
  try {
    await waitFor('the listening line', () => LISTENING.test(server.stderr.text), server.proc)
  } catch (error) {
    server.proc.kill('SIGKILL')
    await server.drained
    throw new Error(`${(error as Error).message}; stderr:\n${server.stderr.text}`)
  }
  const listening = LISTENING.exec(server.stderr.text)!
  return { ...server, url: (listening[1] ?? listening[2])! }
}

/** Sends `signal` (unless null: already sent) and waits for the exit and all output; -9 for SIGKILL. */
export async function stopServer(server: ServerProcess, signal: 'SIGTERM' | 'SIGINT' | 'SIGHUP' | 'SIGKILL' | null): Promise<number> {
  if (signal) server.proc.kill(signal)
  const code = await server.proc.exited
  await server.drained
  return server.proc.signalCode === 'SIGKILL' ? -9 : code
}

/** The vendor id and admin token a first start prints on stdout. */
export function initLine(server: ServerProcess): { organization_id: string; token: string } {
  return JSON.parse(server.stdout.text.trim().split('\n')[0]!)
}

/** A server's answer over HTTP (`api`): unlike the harness's in-process answers, its content type only of the headers. */
export interface HttpAnswer {
  readonly status: number
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any
  readonly contentType: string
}

/** One JSON request; rejects if the connection fails (the server died) or it takes too long. */
export async function api(url: string, token: string, method: string, path: string, body?: unknown): Promise<HttpAnswer> {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body !== undefined ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(DEADLINE_MS),
  })
  const text = await response.text()
  let parsed: unknown = text
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {}
  return { status: response.status, body: parsed, contentType: response.headers.get('content-type') ?? '' }
}

/** A server over HTTP as fixtures.ts `requestOk` calls it: with `token` unless a request names its own. */
export function httpCaller(url: string, token: string) {
  return { request: (method: string, path: string, init: { body?: unknown; token?: string } = {}) => api(url, init.token ?? token, method, path, init.body) }
}
