/**
 * Reading a data dir without its lock, beside a server that may be writing it (`issue-token`,
 * `verify`, `backup`). Nothing is written, nothing repaired.
 *
 * The server appends to its newest log segment and may compact at any moment: write a new snapshot
 * (renamed over the old one), then delete the segments it covers. A read that overlaps a compaction
 * can find a gap in the log (the old snapshot, then only the segments after the new one), or lose a
 * segment deleted between listing and reading it (a missing segment reads as empty), which no check
 * of the records would notice. So a read counts only if the snapshot is the same file after it as
 * before it; otherwise it is done again. Damage found while the dir was changing may be an append
 * seen half copied: read again too. Damage in a dir that did not change is damage.
 */
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { createTables, type Tables } from './tables'
import { hasPaddedLog, readDataFormat, type DataFormat } from './format'
import { isErrnoCode } from './fs-util'
import { SNAPSHOT_FILE } from './paths'
import { isDamageError, recover, type Recovered } from './recovery'
import { listSegments } from './wal'

/** Reads that overlap a compaction are rare (one per 64 MiB of log at the least): a few suffice. */
const ATTEMPTS = 10

export interface DataDirContents {
  readonly format: DataFormat
  readonly tables: Tables
  readonly recovered: Recovered
  /** How many reads it took: more than one when a compaction overlapped one. */
  readonly reads: number
}

export async function readDataDir(dir: string): Promise<DataDirContents> {
  const { value, reads } = await readConsistently(dir, async () => {
    const format = await readDataFormat(dir)
    const tables = createTables()
    const recovered = await recover(dir, tables, { repair: false, warn: () => {}, paddedLog: hasPaddedLog(format) })
    return { format, tables, recovered }
  })
  return { ...value, reads }
}

/** Runs `read` until it overlaps no snapshot replacement (see above); at most ATTEMPTS times. */
export async function readConsistently<T>(dir: string, read: () => Promise<T>): Promise<{ value: T; reads: number }> {
  for (let attempt = 1; ; attempt++) {
    const before = await filesState(dir)
    try {
      const value = await read()
      if ((await filesState(dir)).snapshot === before.snapshot) return { value, reads: attempt }
    } catch (error) {
      const racing = isErrnoCode(error, 'ENOENT') || isDamageError(error)
      // Damage in a dir that changed meanwhile is no proof of damage, on the last read too.
      if (!racing || sameState(before, await filesState(dir))) throw error
    }
    if (attempt >= ATTEMPTS) throw new Error(`data dir ${dir} changed under each of ${ATTEMPTS} reads (compacted or written to meanwhile): try again`)
  }
}

interface FilesState {
  /** Which snapshot file is there: a new one is another inode, written at another time. */
  readonly snapshot: string
  readonly log: string
}

async function filesState(dir: string): Promise<FilesState> {
  const identity = (path: string) =>
    stat(path).then(
      (s) => `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`,
      (error) => (isErrnoCode(error, 'ENOENT') ? 'none' : Promise.reject(error)),
    )
  const segments = await listSegments(dir)
  const log = await Promise.all(segments.map(async (segment) => `${segment.path}=${await identity(segment.path)}`))
  return { snapshot: await identity(join(dir, SNAPSHOT_FILE)), log: log.join(',') }
}

const sameState = (a: FilesState, b: FilesState) => a.snapshot === b.snapshot && a.log === b.log
