/**
 * Temporary dirs of the tests (data dirs, archives, sockets): made under the system's temporary
 * dir, and removed once the whole run is over (test/support/cleanup.ts, preloaded by bunfig.toml);
 * a run used to leave hundreds of MiB of them in /tmp.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const made: string[] = []

/** A new private dir under the system's temporary dir, removed after the run. */
export function tempDir(prefix = 'keyward-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  made.push(dir)
  return dir
}

/** The path of a data dir not made yet (the CLI or the store makes it), in a new `tempDir`. */
export const tempDataDir = (prefix?: string): string => join(tempDir(prefix), 'data')

export function removeTempDirs(): void {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true })
}
