/**
 * keyward as the benchmarks run it: the real CLI (`bun run src/main.ts`), never its internals, so
 * that they keep measuring what users run as its options and token scheme change. `init` makes a
 * store, `issue-token` the tokens, `serve` the server (on a data dir or a database).
 */
import type { Subprocess } from 'bun'
import { Children, ProcessLog, freePort, waitReady } from './servers'
import { cpuSeconds, procStatus } from './system'
import { baseEnv, keywardCommand, ROOT } from '../../test/support/server-process'

/** Where keyward keeps its data: a data dir (the embedded store) or a PostgreSQL database. */
export type Target = { readonly store: 'embedded'; readonly dir: string } | { readonly store: 'postgres'; readonly url: string }

const targetArgs = (target: Target) => (target.store === 'embedded' ? ['--data', target.dir] : ['--database-url', target.url])

/** A one-shot command (`init`, `issue-token`, `--help`...): its stdout; its stderr in the error if it fails. */
export async function keywardCli(args: string[], root = ROOT): Promise<string> {
  // Without the KEYWARD_* settings of the caller's shell: the benchmark says what it runs.
  const proc = Bun.spawn(keywardCommand(args), { cwd: root, env: baseEnv, stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  if (code !== 0) throw new Error(`keyward ${args[0]} exited ${code}: ${stderr.trim().slice(0, 600)}`)
  return stdout
}

/** `keyward init`: the vendor organization of a new store (`root`: as keywardCli's). */
export async function initStore(target: Target, root = ROOT): Promise<{ organization_id: string }> {
  const line = (await keywardCli(['init', ...targetArgs(target)], root)).trim().split('\n').at(-1)!
  return { organization_id: (JSON.parse(line) as { organization_id: string }).organization_id }
}

/** `keyward issue-token`: an admin token of `org` (the last line it prints). Never printed by the benchmarks. */
export async function issueToken(target: Target, org: string, role = 'admin', root = ROOT): Promise<string> {
  const token = (await keywardCli(['issue-token', ...targetArgs(target), '--org', org, '--role', role, '--ttl', '30d'], root)).trim().split('\n').at(-1)
  if (!token) throw new Error(`keyward issue-token printed no token for ${org}`)
  return token
}

const serveHelp = new Map<string, Promise<string>>()

/**
 * Options every benchmark passes to `serve`: rate limits off (`--rate-limit 0`), where the keyward
 * of `root` has them, since a load generator sends far more than any client should with one token;
 * or `rateLimit` requests per second (bench/run.ts `--rate-limit`: the limits' cost measured, set
 * far above the load). Read from `serve --help`, so that the benchmarks run on a keyward with or
 * without the option.
 */
export async function benchServeOptions(root = ROOT, rateLimit = 0): Promise<{ args: string[]; note: string }> {
  if (!serveHelp.has(root)) serveHelp.set(root, keywardCli(['serve', '--help'], root))
  const help = await serveHelp.get(root)!
  if (!help.includes('--rate-limit')) return { args: [], note: 'no rate limits (this keyward has no `--rate-limit` option)' }
  if (rateLimit > 0) return { args: ['--rate-limit', String(rateLimit)], note: `rate limits on (\`--rate-limit ${rateLimit}\`, above any load here)` }
  return { args: ['--rate-limit', '0'], note: 'rate limits off (`--rate-limit 0`)' }
}

export interface RunningKeyward {
  readonly proc: Subprocess
  readonly port: number
  /** Its stderr (lifecycle lines, and a line per request where it logs them). */
  readonly log: ProcessLog
  /** Spawn until `GET /healthz` answered 200. */
  readonly startupSeconds: number
  /** CPU time the process used until then (steadier than the wall time on a shared machine). */
  readonly startupCpuSeconds: number
  readonly rssAtReady: number
}

/**
 * `keyward serve` on `target` and a free port, ready once `/healthz` answers. `profileDir`: under
 * `bun --cpu-prof`, the profile written there when it stops (SIGTERM: it must exit by itself).
 */
export async function startKeyward(
  children: Children,
  target: Target,
  /**
   * `root`: the checkout whose src/main.ts runs (default this one); `rateLimit`: see benchServeOptions;
   * `prefix`: a command the server runs under (a memory cgroup's, bench/support/system.ts).
   */
  options: { name: string; timeoutMs?: number; profileDir?: string; root?: string; rateLimit?: number; prefix?: readonly string[] },
): Promise<RunningKeyward> {
  const root = options.root ?? ROOT
  const port = await freePort()
  const profile = options.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.profileDir}`, `--cpu-prof-name=${options.name.replace(/\W+/g, '-')}-${Date.now()}.cpuprofile`] : []
  const begun = performance.now()
  const proc = children.spawn(
    [...(options.prefix ?? []), process.execPath, ...profile, 'run', 'src/main.ts', 'serve', ...targetArgs(target), '--port', String(port), ...(await benchServeOptions(root, options.rateLimit)).args],
    { cwd: root, env: baseEnv, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' },
  )
  const log = new ProcessLog(proc.stderr)
  await waitReady(options.name, proc, `http://127.0.0.1:${port}/healthz`, { timeoutMs: options.timeoutMs ?? 120_000, log: () => log.text() })
  const startupSeconds = (performance.now() - begun) / 1000
  return { proc, port, log, startupSeconds, startupCpuSeconds: (await cpuSeconds(proc.pid)) ?? NaN, rssAtReady: await procStatus(proc.pid, 'VmRSS') }
}
