import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { acquireDataDirLock, type DataDirLock, DataDirLockedError } from '../../src/store/lock.ts'

let dir: string
let lockPath: string
const held: DataDirLock[] = []

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'keyward-lock-'))
  lockPath = join(dir, 'serve.lock')
})

afterEach(() => {
  // Release in case a test failed midway; release is idempotent.
  for (const lock of held.splice(0)) lock.release()
  rmSync(dir, { recursive: true, force: true })
})

function acquire(): DataDirLock {
  const lock = acquireDataDirLock(dir)
  held.push(lock)
  return lock
}

function lockedError(): DataDirLockedError {
  let caught: unknown
  try {
    acquire()
  } catch (error) {
    caught = error
  }
  expect(caught).toBeInstanceOf(DataDirLockedError)
  return caught as DataDirLockedError
}

/** A PID that belonged to a process which has exited and been reaped. */
function deadPid(): number {
  const child = Bun.spawnSync(['true'])
  expect(child.exitCode).toBe(0)
  return child.pid
}

describe('acquireDataDirLock', () => {
  test('creates serve.lock holding our pid, mode 0600', () => {
    acquire()
    expect(readFileSync(lockPath, 'utf8').trim()).toBe(String(process.pid))
    expect(statSync(lockPath).mode & 0o777).toBe(0o600)
  })

  test('a second acquire on the same dir is refused', () => {
    acquire()
    const error = lockedError()
    expect(error.pid).toBe(process.pid)
    expect(error.message).toContain(`data dir ${dir} is already in use by a running keyward (pid ${process.pid})`)
    expect(readFileSync(lockPath, 'utf8').trim()).toBe(String(process.pid)) // untouched
  })

  test('a lock held by another live process is refused', () => {
    writeFileSync(lockPath, '1\n') // PID 1 always exists (EPERM counts as alive too)
    expect(lockedError().pid).toBe(1)
    expect(readFileSync(lockPath, 'utf8')).toBe('1\n')
  })

  test('after release the lock file is gone and acquire succeeds again', () => {
    const first = acquire()
    first.release()
    expect(existsSync(lockPath)).toBe(false)
    acquire()
    expect(readFileSync(lockPath, 'utf8').trim()).toBe(String(process.pid))
  })

  test('a stale release does not remove a later lock', () => {
    const first = acquire()
    first.release()
    acquire()
    first.release() // second release of the first handle
    expect(existsSync(lockPath)).toBe(true)
    lockedError()
  })

  test('release leaves a lock file that no longer holds our pid', () => {
    const lock = acquire()
    writeFileSync(lockPath, '1\n') // e.g. an operator deleted ours and another server took over
    lock.release()
    expect(readFileSync(lockPath, 'utf8')).toBe('1\n')
  })

  test('a lock held by a dead process is taken over', () => {
    writeFileSync(lockPath, `${deadPid()}\n`)
    acquire()
    expect(readFileSync(lockPath, 'utf8').trim()).toBe(String(process.pid))
  })

  test('a lock holding an impossible pid is taken over', () => {
    writeFileSync(lockPath, '2147483646\n')
    acquire()
    expect(readFileSync(lockPath, 'utf8').trim()).toBe(String(process.pid))
  })

  test.each(['', 'garbage', '0', '-1', '12abc', '99999999999999'])('a lock file holding %p is taken over', (text) => {
    writeFileSync(lockPath, text)
    acquire()
    expect(readFileSync(lockPath, 'utf8').trim()).toBe(String(process.pid))
  })

  test('a lock holding our own pid, left by an earlier process, is taken over', () => {
    // Containers often give the server the same PID (1) after every restart.
    writeFileSync(lockPath, `${process.pid}\n`)
    acquire()
    expect(readFileSync(lockPath, 'utf8').trim()).toBe(String(process.pid))
    lockedError() // and now it really is held
  })

  test('a missing data dir is an error, not a lock', () => {
    expect(() => acquireDataDirLock(join(dir, 'missing'))).toThrow(expect.objectContaining({ code: 'ENOENT' }))
  })
})
