/**
 * Exclusive use of a data dir by one process (`serve`, `init`): an flock(2) on the data dir itself
 * and one on its `serve.lock`, held by the kernel on the open files rather than judged by a process
 * id. So it holds across PID namespaces and across containers that mount the same dir (they share
 * the files), and it is free the moment its holder dies, however it dies. (README "The data dir".)
 *
 * The file stays after release: deleting it while another process waits to open it would let two
 * processes lock two different files of the same name. Deleted under a running server, it let a
 * second server, or a token command that then wrote a snapshot and removed the log the first was
 * still appending to, take the dir: acknowledged writes were lost (review, 2026-11-30). The lock on
 * the dir itself cannot be lost so; the file's is kept for versions before it, which lock only the
 * file. The file holds nothing but the clock's time (`recordedTime`).
 */
import { dlopen, FFIType, read } from 'bun:ffi'
import { closeSync, constants, openSync, readFileSync, writeSync } from 'node:fs'
import { currentMicros } from './clock'
import { constants as os } from 'node:os'
import { join } from 'node:path'

export const LOCK_FILE = 'serve.lock'

export type DataDirLock = {
  /** Notes the clock's time in the lock file (`recordedTime`), then gives the lock up. */
  release(): void
  /** Notes the clock's time in the lock file (`recordedTime`): `serve` does every few seconds. */
  recordTime(): void
}

/** Written at the start of the lock file, space-padded: the microseconds (at most 20 digits) and their CRC-32 in hex. */
const RECORDED_TIME_BYTES = 32

/** `<micros> <crc32 of the digits>`: a note damaged on disk is not taken for a time (it would set the clock anywhere). */
export const noteOf = (micros: number) => {
  const digits = String(micros)
  return `${digits} ${(Bun.hash.crc32(digits) >>> 0).toString(16)}`.padEnd(RECORDED_TIME_BYTES)
}

/**
 * The clock's time as the lock's last holder noted it (every few seconds while serving, and when it
 * let go), in the lock file; 0 if none was. The store's clock goes on from it after a restart
 * (`Store.open`), not only from the newest stored timestamp: with the system clock set back in the
 * meantime, time that passed with no write would be forgotten, and a token that had expired then
 * would be accepted again (docs/storage.md "Embedded"). Not fsynced: a process that is killed leaves
 * its writes in the page cache, and after a power loss the time is as old as the last note that
 * reached the disk. The file means nothing else.
 */
export function recordedTime(dir: string): number {
  try {
    return timeOfNote(readFileSync(join(dir, LOCK_FILE), 'latin1'))
  } catch {
    return 0 // no lock file yet, or not readable: nothing noted
  }
}

/**
 * The latest time a note may hold: the end of the year 9999, the last the API's timestamps can
 * write. A note beyond it (a damaged or forged one whose checksum was made again) is no time: a
 * store clock set there could stamp nothing (review, 2026-11-30).
 */
const LATEST_NOTED_MICROS = Date.UTC(9999, 11, 31, 23, 59, 59, 999) * 1000 + 999

/** The time a lock file's text notes (`noteOf`), or 0 for none or a damaged one. Backups carry one too (src/cli/backup.ts). */
export function timeOfNote(fileText: string): number {
  const text = fileText.slice(0, RECORDED_TIME_BYTES).trim()
  const digits = /^(\d{1,20}) [0-9a-f]{1,8}$/.exec(text)?.[1]
  const micros = Number(digits)
  return digits !== undefined && noteOf(micros).trim() === text && micros <= LATEST_NOTED_MICROS ? micros : 0
}

export class DataDirLockedError extends Error {
  constructor(readonly dir: string) {
    super(
      `data dir ${dir} is already in use by another running keyward (a server, or a command such as tokens, issue-token or restore; it holds the lock on ${join(dir, LOCK_FILE)}): stop that one first, or wait for it to end`,
    )
    this.name = 'DataDirLockedError'
  }
}

/** The data dir is on a read-only file system: nothing that writes can use it (`verify`, `backup` and `tokens list` read it without the lock). */
export class ReadOnlyDataDirError extends Error {
  constructor(readonly dir: string) {
    super(`data dir ${dir} is on a read-only file system (EROFS): only verify, backup and tokens list can read it there; serve, init, restore and the token commands that write need it writable`)
    this.name = 'ReadOnlyDataDirError'
  }
}

/** Throws DataDirLockedError when another process (or another open file in this one) holds the dir or its lock file. */
export function acquireDataDirLock(dir: string): DataDirLock {
  const dirFd = lockDir(dir)
  try {
    return lockFile(dir, dirFd)
  } catch (error) {
    if (dirFd !== null) closeSync(dirFd)
    throw error
  }
}

/**
 * The flock on the data dir itself: its fd, or null where the file system locks no directory (NFS
 * emulates flock with byte-range locks, which need a file open for writing): there the lock file's
 * lock alone holds, as in versions before this one.
 */
function lockDir(dir: string): number | null {
  let fd: number
  try {
    fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY)
  } catch {
    return null // opening the lock file below reports what is wrong with the dir
  }
  const error = tryLockExclusive(fd)
  if (error === null) return fd
  closeSync(fd)
  if (error === os.errno.EWOULDBLOCK) throw new DataDirLockedError(dir)
  return null
}

function lockFile(dir: string, dirFd: number | null): DataDirLock {
  const path = join(dir, LOCK_FILE)
  // O_NOFOLLOW: the lock is the dir's own file, never one a link points to. The fd is close-on-exec
  // (Bun opens every file so), so no child process can inherit the lock and keep it alive.
  let fd: number
  try {
    fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ELOOP') throw new Error(`${path} is a symbolic link: the lock must be the data dir's own file; delete the link`)
    if (code === 'EACCES') throw new Error(`${path} cannot be opened (EACCES): it must be a file of the user running keyward; delete it, or chown it to that user`)
    if (code === 'EROFS') throw new ReadOnlyDataDirError(dir)
    throw error
  }
  const error = tryLockExclusive(fd)
  if (error !== null) {
    closeSync(fd)
    if (error === os.errno.EWOULDBLOCK) throw new DataDirLockedError(dir)
    throw new Error(`cannot lock ${path}: flock failed with errno ${error} (does this file system support flock?)`)
  }
  let released = false
  // Never noted back: a holder that gives the dir up before its store has gone on from the note
  // (a refused start, a damaged dir) would otherwise write its system clock's time over it.
  const noted = recordedTime(dir)
  const recordTime = () => {
    if (released) return
    try {
      writeSync(fd, noteOf(Math.max(currentMicros(), noted)), 0, 'latin1')
    } catch {
      // A note that cannot be written (a full disk) costs only what it would have kept.
    }
  }
  return {
    recordTime,
    release: () => {
      // Once only: the fd number may belong to another file by a second call.
      if (released) return
      recordTime()
      released = true
      closeSync(fd) // closing the only descriptor of the open file releases its lock
      if (dirFd !== null) closeSync(dirFd)
    },
  }
}

const LOCK_EX = 2
const LOCK_NB = 4

/** null when the lock is now ours, otherwise flock's errno. */
function tryLockExclusive(fd: number): number | null {
  const libc = loadLibc()
  for (;;) {
    if (libc.flock(fd, LOCK_EX | LOCK_NB) === 0) return null
    const errno = libc.errno()
    if (errno !== os.errno.EINTR) return errno
  }
}

interface Libc {
  flock(fd: number, operation: number): number
  /** The calling thread's errno, read right after a failed call. */
  errno(): number
}

/** The C library, loaded on first use (only `serve` and `init` lock). */
let libc: Libc | undefined

function loadLibc(): Libc {
  return (libc ??= openLibc())
}

function openLibc(): Libc {
  const flock = { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 } as const
  const errnoAddress = { args: [], returns: FFIType.ptr } as const
  if (process.platform === 'darwin') {
    const { symbols } = dlopen('libc.dylib', { flock, __error: errnoAddress })
    return { flock: symbols.flock, errno: () => read.i32(symbols.__error()!, 0) }
  }
  // glibc, then musl (Alpine).
  const names = ['libc.so.6', `libc.musl-${process.arch === 'arm64' ? 'aarch64' : 'x86_64'}.so.1`]
  for (const name of names) {
    let library
    try {
      library = dlopen(name, { flock, __errno_location: errnoAddress })
    } catch {
      continue
    }
    const { symbols } = library
    return { flock: symbols.flock, errno: () => read.i32(symbols.__errno_location()!, 0) }
  }
  throw new Error(`cannot load the C library for flock (tried ${names.join(', ')})`)
}
