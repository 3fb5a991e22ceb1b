/**
 * The data dir lock (README "The data dir"): an flock held by the kernel, refused to any other open
 * of the lock file (in this process or another), free as soon as its holder releases it or dies, and
 * never inherited by a child process.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Subprocess } from 'bun'
import { acquireDataDirLock, type DataDirLock, DataDirLockedError, noteOf, recordedTime } from '../../src/store/lock.ts'
import { currentMicros } from '../../src/store/clock.ts'
import { ROOT } from '../support/server-process.ts'

let dir: string
let lockPath: string
const held: DataDirLock[] = []
const children: Subprocess[] = []

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'keyward-lock-'))
  lockPath = join(dir, 'serve.lock')
})

afterEach(async () => {
  // Release in case a test failed midway; release is idempotent.
  for (const lock of held.splice(0)) lock.release()
  for (const child of children.splice(0)) {
    child.kill('SIGKILL')
    await child.exited
  }
  rmSync(dir, { recursive: true, force: true })
})

function acquire(): DataDirLock {
  const lock = acquireDataDirLock(dir)
  held.push(lock)
  return lock
}

function expectLocked(): void {
  let caught: unknown
  try {
    acquire()
  } catch (error) {
    caught = error
  }
  expect(caught).toBeInstanceOf(DataDirLockedError)
  expect((caught as Error).message).toBe(
    `data dir ${dir} is already in use by another running keyward (a server, or a command such as tokens, issue-token or restore; it holds the lock on ${lockPath}): stop that one first, or wait for it to end`,
  )
}

/**
 * Another process that runs `script` (with `dir` and `acquireDataDirLock` in scope), prints "ready"
 * and then waits until it is killed.
 */
async function otherProcess(script: string): Promise<Subprocess<'pipe', 'pipe', 'inherit'>> {
  const source = `import { acquireDataDirLock } from './src/store/lock.ts'
    const dir = ${JSON.stringify(dir)}
    ${script}
    console.log('ready')
    for await (const _ of Bun.stdin.stream()) {}` // holds on until killed (or stdin closes)
  const child = Bun.spawn([process.execPath, '-e', source], { cwd: ROOT, stdin: 'pipe', stdout: 'pipe', stderr: 'inherit' })
  children.push(child)
  let output = ''
  const decoder = new TextDecoder()
  for await (const chunk of child.stdout) {
    output += decoder.decode(chunk, { stream: true })
    if (output.includes('\n')) break
  }
  expect(output).toBe('ready\n') // not an exit (an error on stderr) first
  return child
}

describe('acquireDataDirLock', () => {
  test('creates serve.lock, mode 0600, and a second acquire, even in the same process, is refused', () => {
    acquire()
    expect(statSync(lockPath).mode & 0o777).toBe(0o600)
    expectLocked()
  })

  test('a lock held by another process is refused; once that process is killed it is free at once', async () => {
    const holder = await otherProcess('acquireDataDirLock(dir)')
    expectLocked()
    holder.kill('SIGKILL')
    await holder.exited
    acquire()
  })

  test('after release the file stays, and the lock can be taken again; a second release does nothing', () => {
    const first = acquire()
    first.release()
    expect(existsSync(lockPath)).toBe(true) // deleting it would let two processes lock two different files
    acquire()
    first.release() // must not release the later acquisition
    expectLocked()
  })

  test('a child process spawned while the lock is held does not keep it', async () => {
    const lock = acquire()
    await otherProcess('') // inherits no descriptor of ours (close-on-exec)
    lock.release()
    acquire()
  })

  test('what the file holds does not matter (a pid left by an older keyward, say)', () => {
    writeFileSync(lockPath, '1\n')
    acquire()
    expectLocked()
  })

  test('a symbolic link in place of the lock file is refused, not followed', () => {
    symlinkSync(join(dir, 'elsewhere'), lockPath)
    expect(() => acquire()).toThrow(`${lockPath} is a symbolic link: the lock must be the data dir's own file; delete the link`)
    expect(existsSync(join(dir, 'elsewhere'))).toBe(false)
  })

  test('a missing data dir is an error, not a lock', () => {
    expect(() => acquireDataDirLock(join(dir, 'missing'))).toThrow(expect.objectContaining({ code: 'ENOENT' }))
  })
})

describe("the clock's time noted in the lock file (docs/storage.md \"Embedded\")", () => {
  test('noted on release, and whenever asked; read back as it was written', () => {
    expect(recordedTime(dir)).toBe(0) // no lock file yet
    const before = currentMicros()
    const lock = acquire()
    lock.release()
    const noted = recordedTime(dir)
    expect(noted).toBeGreaterThanOrEqual(before)
    expect(noted).toBeLessThanOrEqual(currentMicros())
    const again = acquire()
    again.recordTime()
    expect(recordedTime(dir)).toBeGreaterThanOrEqual(noted)
  })

  test('never noted back: a holder that lets go before its clock has gone on from the note leaves it as it was', () => {
    const ahead = currentMicros() + 2 * 3600 * 1_000_000
    writeFileSync(lockPath, noteOf(ahead))
    acquire().release() // as a start refused before its store was opened
    expect(recordedTime(dir)).toBe(ahead)
  })

  test('a damaged note is no time: a changed digit, a changed checksum, text of an older keyward', () => {
    const note = noteOf(1_790_000_000_123_456)
    writeFileSync(lockPath, note)
    expect(recordedTime(dir)).toBe(1_790_000_000_123_456)
    for (const damaged of [note.replace('1790', '9790'), note.replace(/ [0-9a-f]+/, ' 0'), '1\n', '']) {
      writeFileSync(lockPath, damaged)
      expect({ damaged, time: recordedTime(dir) }).toEqual({ damaged, time: 0 })
    }
  })
})

