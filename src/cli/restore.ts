/**
 * `keyward restore --from FILE --data DIR`: a backup (backup.ts) back into a data dir that is missing
 * or empty (dotfiles aside, as README "The data dir" counts a dir to initialise). The whole archive is
 * checked first (every checksum, the data format); only then is anything written: each file under a
 * temporary name, fsynced, renamed, mode 0600, the dir 0700 and fsynced.
 *
 * It writes under the data dir's lock, as `serve` and `init` do (README "The data dir"): a `serve`
 * started on the dir meanwhile is refused (the lock is held), or holds the lock first and the
 * restore is refused; never does a first start initialise the dir while the restore writes into
 * it, and then overwrite what was restored with its own snapshot.
 *
 * Every file is written in full under its temporary name first; then they are renamed, the snapshot
 * last: it holds everything, and it is what makes the dir keyward's. A restore killed before that
 * rename leaves temporary files (and perhaps `format`), which make the dir one `serve` refuses (not
 * keyward's), never a dir it would take for new and initialise; killed after it, the dir is whole.
 * One that fails with an error (a full disk) takes away what it wrote: the dir is as it found it,
 * and the restore can be run again (it once failed on `format` after placing the snapshot: a whole
 * dir, refused by the retry, after a restore that said it failed). A backup taken by a version with signed tokens also
 * holds that version's `secret`: it is checked like the rest and not restored (README "Tokens").
 */
import { printDone } from './stdout'
import { open, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { ArchiveDamageError, checkArchive, copyMember, readMember, type ArchiveMember } from '../store/backup-archive'
import { FORMAT_FILE, parseDataFormat } from '../store/format'
import { DataDirError, holdsKeywardData, inspectDataDir, prepareDataDir } from '../store/data-dir'
import { acquireDataDirLock, timeOfNote } from '../store/lock'
import { advanceClockPast } from '../store/clock'
import { fsyncDir } from '../store/fs-util'
import { SECRET_FILE, SNAPSHOT_FILE } from '../store/paths'
import { BACKUP_CLOCK_FILE, BACKUP_FILES, refuseInDatabaseMode } from './backup'
import { UsageError } from './usage'

export interface RestoreOptions {
  readonly from?: string
  readonly data?: string
  readonly databaseUrl?: string
}

export async function restoreCommand(options: RestoreOptions): Promise<number> {
  refuseInDatabaseMode('restore', options)
  if (!options.from) throw new UsageError('--from is required')
  if (!options.data) throw new UsageError('--data is required')
  const { from, data } = options
  if (!(await stat(from).then((info) => info.isFile(), () => false))) throw new Error(`backup ${from} does not exist or is not a file`)
  // The checks of every data dir (README "The data dir": a real directory, owned by this user), and no data in it.
  await inspectDataDir(data)
  await refuseKeywardData(data)

  const members = await checkArchive(from, [...BACKUP_FILES, BACKUP_CLOCK_FILE, SECRET_FILE])
  const member = (name: string) => {
    const found = members.find((m) => m.name === name)
    if (!found) throw new ArchiveDamageError(from, 0, `${name} is missing`)
    return found
  }
  const formatMember = member(FORMAT_FILE)
  parseDataFormat((await readMember(from, formatMember, 64)).toString('utf8'), `${from}: ${FORMAT_FILE}`, `backup ${from}`)
  // The clock's time at the backup (backup.ts): the lock's release below notes it in the dir, for the first start.
  const clockMember = members.find((m) => m.name === BACKUP_CLOCK_FILE)
  if (clockMember) {
    const noted = timeOfNote((await readMember(from, clockMember, 64)).toString('latin1'))
    // Its checksum matched, so the archive was written so: refused like any other damage, before anything is written.
    if (noted === 0) throw new ArchiveDamageError(from, 0, `${BACKUP_CLOCK_FILE} holds no time keyward can use (the store's clock at the backup)`)
    advanceClockPast(noted)
  }

  await prepareDataDir(data)
  const lock = acquireDataDirLock(data)
  try {
    // Again under the lock: a server may have started, initialised the dir and stopped since.
    await refuseKeywardData(data)
    await restoreFiles(from, RESTORE_ORDER.map((name) => ({ member: member(name), path: join(data, name) })))
    await fsyncDir(data)
  } finally {
    lock.release()
  }
  printDone(`keyward: restored ${from} into data dir ${data}\n`, `${from} was restored into data dir ${data}`)
  return 0
}

/** A dir holding keyward's data is not restored into; one holding only the lock (and what a start that died left) is. */
async function refuseKeywardData(data: string): Promise<void> {
  if (await holdsKeywardData(data)) throw new DataDirError(`${data} holds a keyward data dir already: restore only into an empty or new dir`)
}

/** The files restored, in the order they are put in place: the snapshot, which makes the dir keyward's, last. */
const RESTORE_ORDER = [...BACKUP_FILES.filter((name) => name !== SNAPSHOT_FILE), SNAPSHOT_FILE]

/**
 * The files, each written to a temporary file and synced, then all renamed in order. A failure
 * takes away every file it wrote (a full disk): left there, they would make the dir one that a
 * retry and `serve` refuse, or take as whole after a restore that said it failed.
 */
async function restoreFiles(archive: string, files: readonly { member: ArchiveMember; path: string }[]): Promise<void> {
  const written: string[] = []
  try {
    for (const { member, path } of files) {
      const temporary = `${path}.tmp`
      await rm(temporary, { force: true })
      const file = await open(temporary, 'wx', 0o600)
      written.push(temporary)
      try {
        await copyMember(archive, member, file)
        await file.sync()
      } finally {
        await file.close()
      }
    }
    for (const { path } of files) {
      await rename(`${path}.tmp`, path)
      written.push(path)
    }
  } catch (error) {
    for (const path of written) await rm(path, { force: true })
    throw error
  }
}
