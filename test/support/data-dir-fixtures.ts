/**
 * The data dir fixtures of test/fixtures (written by older builds, see the README there), copied to
 * a temp dir with the modes git does not keep: the dir 0700, its files 0600.
 */
import { chmodSync, cpSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Dump } from './sample-data'

export const FIXTURES = join(import.meta.dir, '../fixtures')

export interface Fixture {
  /** The commit whose build wrote it. */
  readonly commit: string
  /** `stopped` by SIGTERM (a snapshot, an empty log) or `killed` by SIGKILL (a log to replay). */
  readonly ending: 'stopped' | 'killed'
  readonly vendor_id: string
  /** What that build's API showed before the stop. */
  readonly records: Dump
}

/** Copies fixture `name`'s data dir to `dir` (which must not exist) and returns what it holds. */
export function copyFixture(name: string, dir: string): Fixture {
  cpSync(join(FIXTURES, name, 'data'), dir, { recursive: true })
  chmodSync(dir, 0o700)
  for (const file of readdirSync(dir)) chmodSync(join(dir, file), 0o600)
  return JSON.parse(readFileSync(join(FIXTURES, name, 'expected.json'), 'utf8'))
}
