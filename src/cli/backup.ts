/**
 * `keyward backup --out FILE [--data DIR]`: a consistent copy of a data dir, taken beside a running
 * server without its lock (README "Backup, restore, verify").
 *
 * The dir is read as a start would read it (store/read-only.ts: read again if a snapshot replaced
 * the one read meanwhile), every checksum checked, and what it holds is written as a fresh snapshot
 * with the `format` file and the store's clock (`BACKUP_CLOCK_FILE`) into one archive (store/backup-archive.ts). Every write
 * acknowledged before the backup began is on disk by then, so it is in the archive. The archive is
 * written beside FILE under a temporary name (mode 0600), fsynced and renamed over FILE.
 */
import { printDone } from './stdout'
import { mkdtemp, open, rename, rm, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import { writeArchive } from '../store/backup-archive'
import { snapshotOf } from '../store/tables-snapshot'
import { DATA_FORMAT, FORMAT_FILE, FORMAT_FILE_TEXT } from '../store/format'
import { fsyncDir, notWritableCode } from '../store/fs-util'
import { SNAPSHOT_FILE } from '../store/paths'
import { advanceClockPast, currentMicros } from '../store/clock'
import { LOCK_FILE, noteOf, recordedTime } from '../store/lock'
import { writeSnapshot } from '../store/snapshot-file'
import { UsageError } from './usage'
import { checkDataDir, recordCounts } from './verify'

/** The files of a backup that restore writes, in order (the snapshot first: see restore.ts). */
export const BACKUP_FILES = [SNAPSHOT_FILE, FORMAT_FILE] as const

/**
 * The backup's `serve.lock`: the store's clock at the backup, as a server notes it there (src/store/lock.ts).
 * A restore goes on from it, so that time that passed after the last write is not forgotten: with
 * the system clock set back, a token that had expired before the backup worked again once restored
 * (review, 2026-11-30). Backups of earlier versions have none.
 */
export const BACKUP_CLOCK_FILE = LOCK_FILE

/**
 * In database mode (docs/operations.md; `--database-url` comes with it) the data is the database's,
 * and so are its backups: the first thing `backup` and `restore` do is refuse that.
 */
export function refuseInDatabaseMode(command: 'backup' | 'restore', options: { databaseUrl?: string }): void {
  if (options.databaseUrl) throw new UsageError(`${command} works on a data dir; in database mode use the database's own tools (pg_dump, pg_restore)`)
}

/** Whether two paths name one directory: by device and inode, so that a bind mount or a link is seen through. */
async function sameDirectory(a: string, b: string): Promise<boolean> {
  const [first, second] = await Promise.all([stat(a).catch(() => null), stat(b).catch(() => null)])
  return first !== null && second !== null && first.dev === second.dev && first.ino === second.ino
}

export interface BackupOptions {
  readonly data: string
  readonly out?: string
  readonly databaseUrl?: string
}

export async function backupCommand(options: BackupOptions): Promise<number> {
  refuseInDatabaseMode('backup', options)
  if (!options.out) throw new UsageError('--out is required')
  const out = resolve(options.out)
  // Before the work: the archive replaces a file there, never a directory.
  if (await stat(out).then((info) => info.isDirectory(), () => false)) throw new Error(`--out ${options.out} is a directory: name the archive file to write, like ${join(options.out, 'keyward.tar')}`)
  const folder = dirname(out)
  if (!(await stat(folder).then((info) => info.isDirectory(), () => false))) throw new Error(`the directory of --out, ${folder}, does not exist: create it first`)
  // Renamed into the data dir, the archive could replace one of its files (the live log, the
  // snapshot), losing acknowledged writes; nor may a dir keyward uses hold other files.
  if (await sameDirectory(folder, options.data)) {
    throw new Error(`--out ${options.out} is in the data dir: write the archive elsewhere (it could replace the dir's own files)`)
  }
  // Beside FILE, so that the rename is atomic; mkdtemp makes it 0700. Made before the dir is read,
  // so that a directory this user may not write in is said before that work.
  const staging = await mkdtemp(join(folder, '.keyward-backup-')).catch((error: unknown) => {
    const code = notWritableCode(error)
    if (code === undefined) throw error
    throw new Error(`cannot write in ${folder}, the directory of --out (${code}): write the archive where this user may`)
  })
  let checked: Awaited<ReturnType<typeof checkDataDir>>
  try {
    checked = await checkDataDir(options.data)
    // Never before a time stored, nor before the time the dir's server noted, as a start reads them (Store.open).
    advanceClockPast(Math.max(checked.recovered.newestTimestamp, recordedTime(options.data)))
    const snapshot = join(staging, SNAPSHOT_FILE)
    await writeSnapshot(snapshot, snapshotOf(checked.tables, checked.recovered.lastLsn))
    const archive = join(staging, 'backup.tar')
    const file = await open(archive, 'wx', 0o600)
    try {
      await writeArchive(file, [
        { name: SNAPSHOT_FILE, path: snapshot },
        { name: FORMAT_FILE, bytes: Buffer.from(FORMAT_FILE_TEXT) },
        { name: BACKUP_CLOCK_FILE, bytes: Buffer.from(noteOf(currentMicros())) },
      ])
      await file.sync()
    } finally {
      await file.close()
    }
    await rename(archive, out).catch((error: unknown) => {
      const code = (error as NodeJS.ErrnoException)?.code
      if (code !== 'EACCES' && code !== 'EPERM') throw error
      // Another user's file in a directory that keeps each user's files (sticky, like /tmp).
      throw new Error(`cannot replace --out ${options.out} (${code}): it is a file this user may not replace; name another file, or remove that one as its owner`)
    })
    await fsyncDir(dirname(out))
  } finally {
    await rm(staging, { recursive: true, force: true })
  }
  const { lastLsn } = checked.recovered
  printDone(
    `keyward: backup of data dir ${options.data} written to ${options.out} (data format ${DATA_FORMAT}, log position ${lastLsn})\n` +
      `${recordCounts(checked.tables)}\n`,
    `the backup was written to ${options.out}`,
  )
  return 0
}
