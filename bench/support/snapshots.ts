/**
 * Watching a keyward data dir for snapshots (compactions): the store writes `snapshot.json.tmp`,
 * fsyncs it and renames it over `snapshot.json`. Polled, so a snapshot shorter than the interval
 * may be seen only as a replaced file.
 */
import { stat } from 'node:fs/promises'
import { join } from 'node:path'
import { SNAPSHOT_FILE } from '../../src/store/paths'

export interface SnapshotActivity {
  /** Temp files seen appearing. */
  readonly started: number
  /** Times snapshot.json was replaced. */
  readonly finished: number
  /** A snapshot was being written at some point of the watch. */
  readonly busy: boolean
  /** performance.now() when the first temp file was seen (null: none seen). */
  readonly firstStartedAt: number | null
  /** performance.now() when snapshot.json was last seen replaced (null: never). */
  readonly lastFinishedAt: number | null
}

export interface SnapshotWatch {
  /** What has been seen so far. */
  current(): SnapshotActivity
  /** Stops polling (after one last look) and answers what was seen. */
  stop(): Promise<SnapshotActivity>
}

export function watchSnapshots(dir: string, intervalMs = 100): SnapshotWatch {
  let started = 0
  let finished = 0
  let busy = false
  let writing = false
  let firstStartedAt: number | null = null
  let lastFinishedAt: number | null = null
  let identity: string | null | undefined
  let stopped = false
  const poll = async () => {
    const [current, temp] = await Promise.all([fileIdentity(join(dir, SNAPSHOT_FILE)), Bun.file(join(dir, `${SNAPSHOT_FILE}.tmp`)).exists()])
    const now = performance.now()
    if (identity !== undefined && current !== identity) {
      finished++
      busy = true
      lastFinishedAt = now
    }
    identity = current
    if (temp && !writing) {
      started++
      firstStartedAt ??= now
    }
    if (temp) busy = true
    writing = temp
  }
  const activity = (): SnapshotActivity => ({ started, finished, busy, firstStartedAt, lastFinishedAt })
  const loop = (async () => {
    while (!stopped) {
      await poll()
      await Bun.sleep(intervalMs)
    }
    await poll()
  })()
  return {
    current: activity,
    stop: async () => {
      stopped = true
      await loop
      return activity()
    },
  }
}

/** Inode and mtime: a rename over the file changes the inode, a rewrite the mtime. */
async function fileIdentity(path: string): Promise<string | null> {
  try {
    const info = await stat(path)
    return `${info.ino}:${info.mtimeMs}`
  } catch {
    return null
  }
}
