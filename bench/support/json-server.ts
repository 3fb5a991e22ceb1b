/**
 * json-server 0.17.4, the classic lowdb-backed REST server, as the embedded store's point of
 * comparison: installed on first use into bench/.json-server/ (git-ignored) with npm, run on node
 * on a fresh copy of a data set's db.json.
 */
import { link, mkdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { Children, ProcessLog, freePort, waitReady } from './servers'
import { JSON_SERVER_HEAP_MB, JSON_SERVER_VERSION } from './settings'
import { ROOT } from '../../test/support/server-process'

const DIR = join(ROOT, 'bench', '.json-server')
const BIN = join(DIR, 'node_modules', 'json-server', 'lib', 'cli', 'bin.js')

/** Installs json-server (pinned) into bench/.json-server/ unless it is there already. */
export async function ensureJsonServer(children: Children): Promise<void> {
  const pkg = Bun.file(join(DIR, 'node_modules', 'json-server', 'package.json'))
  if ((await pkg.exists()) && ((await pkg.json()) as { version: string }).version === JSON_SERVER_VERSION) return
  const npm = Bun.which('npm')
  if (!npm) throw new Error(`json-server ${JSON_SERVER_VERSION} is not installed in ${DIR} and npm is not on the PATH`)
  console.log(`installing json-server@${JSON_SERVER_VERSION} into bench/.json-server/ (once)...`)
  await mkdir(DIR, { recursive: true })
  const proc = children.spawn(
    [npm, 'install', '--prefix', DIR, '--no-audit', '--no-fund', '--loglevel=error', `json-server@${JSON_SERVER_VERSION}`],
    { cwd: DIR, stdin: 'ignore', stdout: 'inherit', stderr: 'inherit' },
  )
  if ((await proc.exited) !== 0) throw new Error(`npm install json-server@${JSON_SERVER_VERSION} failed (exit ${proc.exitCode})`)
}

/**
 * json-server on a fresh copy of `pristineDb` at `db` (in `workDir`), ready once it answers a read
 * of `probePath`. json-server (lowdb's FileAsync, steno) writes a temp file and renames it over
 * db.json, never in place: a hard link of the pristine file is a fresh copy at no cost.
 */
export async function startJsonServer(children: Children, options: { name: string; pristineDb: string; db: string; workDir: string; probePath: string; timeoutMs: number }) {
  await dropJsonServerFiles(options.db, options.workDir)
  await link(options.pristineDb, options.db)
  const port = await freePort()
  const begun = performance.now()
  const proc = children.spawn(
    ['node', `--max-old-space-size=${JSON_SERVER_HEAP_MB}`, BIN, '--quiet', '--host', '127.0.0.1', '--port', String(port), '--snapshots', options.workDir, options.db],
    { cwd: options.workDir, stdin: 'ignore', stdout: 'ignore', stderr: 'pipe' },
  )
  const log = new ProcessLog(proc.stderr)
  await waitReady(options.name, proc, `http://127.0.0.1:${port}${options.probePath}`, { timeoutMs: options.timeoutMs, intervalMs: 50, log: () => log.text() })
  return { proc, port, log, startupSeconds: (performance.now() - begun) / 1000 }
}

/**
 * Removes json-server's working db.json and steno's temp file: the kernel then drops their dirty
 * pages (json-server never fsyncs) instead of writing them back during some later run.
 */
export async function dropJsonServerFiles(db: string, workDir: string): Promise<void> {
  await rm(db, { force: true })
  await rm(join(workDir, `.~${db.slice(workDir.length + 1)}`), { force: true })
}

export function nodeVersion(): string {
  try {
    return Bun.spawnSync(['node', '--version']).stdout.toString().trim().replace(/^v/, '')
  } catch {
    return '?'
  }
}
