/**
 * Exclusive ownership of a data dir by one running server, via a `serve.lock` file holding the
 * owner's PID. A lock left behind by a killed server (kill -9, power loss) is detected as stale
 * because its PID is no longer running, and taken over.
 */
import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { isErrnoCode } from './fs-util'

export type DataDirLock = { release(): void }

export class DataDirLockedError extends Error {
  readonly dir: string
  /** PID of the owner, or null if it could not be read (lost a race with another starter). */
  readonly pid: number | null

  constructor(dir: string, pid: number | null, lockPath: string) {
    const owner = pid === null ? 'another running keyward' : `a running keyward (pid ${pid})`
    super(
      `data dir ${dir} is already in use by ${owner}; ` +
        `if no keyward is using it, delete ${lockPath}`,
    )
    this.name = 'DataDirLockedError'
    this.dir = dir
    this.pid = pid
  }
}

const LOCK_FILE = 'serve.lock'

/**
 * Lock files this process holds. A lock holding our own PID that is not in here was left by an
 * earlier process with the same PID (common in containers, where the server is often PID 1).
 */
const heldByThisProcess = new Set<string>()

export function acquireDataDirLock(dir: string): DataDirLock {
  const lockPath = resolve(join(dir, LOCK_FILE))
  if (!tryCreateLock(lockPath)) {
    const owner = readOwner(lockPath)
    if (owner !== null && isHeld(lockPath, owner)) throw new DataDirLockedError(dir, owner, lockPath)
    // Stale: remove it and retry once; losing that race to another starter means it is taken.
    removeIfPresent(lockPath)
    if (!tryCreateLock(lockPath)) throw new DataDirLockedError(dir, readOwner(lockPath), lockPath)
  }
  heldByThisProcess.add(lockPath)
  let released = false
  return {
    release: () => {
      if (released) return // a second release must not delete a later acquisition's lock
      released = true
      releaseLock(lockPath)
    },
  }
}

/** Creates the lock file with our PID; false if it already exists. */
function tryCreateLock(lockPath: string): boolean {
  let fd: number
  try {
    fd = openSync(lockPath, 'wx', 0o600)
  } catch (error) {
    if (isErrnoCode(error, 'EEXIST')) return false
    throw error
  }
  try {
    writeSync(fd, `${process.pid}\n`)
  } finally {
    closeSync(fd)
  }
  return true
}

/** The PID in the lock file; null if it is missing, empty or garbage. */
function readOwner(lockPath: string): number | null {
  let text: string
  try {
    text = readFileSync(lockPath, 'utf8').trim()
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return null
    throw error
  }
  if (!/^[0-9]{1,10}$/.test(text)) return null
  const pid = Number(text)
  // PID 0 and negative values would make process.kill signal a whole process group.
  return pid > 0 && pid <= 0x7fff_ffff ? pid : null
}

// Limitation: a dead owner's PID reused by an unrelated process makes a stale lock look held.
function isHeld(lockPath: string, pid: number): boolean {
  if (pid === process.pid) return heldByThisProcess.has(lockPath)
  return isProcessAlive(pid)
}

function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0) // signal 0: existence check only
    return true
  } catch (error) {
    if (isErrnoCode(error, 'EPERM')) return true // exists, owned by another user
    if (isErrnoCode(error, 'ESRCH')) return false
    throw error
  }
}

/** Removes the lock file only if it is still ours, so we never delete a successor's lock. */
function releaseLock(lockPath: string): void {
  heldByThisProcess.delete(lockPath)
  if (readOwner(lockPath) === process.pid) removeIfPresent(lockPath)
}

function removeIfPresent(path: string): void {
  try {
    unlinkSync(path)
  } catch (error) {
    if (!isErrnoCode(error, 'ENOENT')) throw error
  }
}
