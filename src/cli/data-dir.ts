/**
 * A token command of the CLI on a data dir (README "Tokens"): the server running on the dir is its
 * only writer, so the command goes to that server when there is one, and is done here otherwise.
 *
 * The data-dir lock decides: got it, no server runs (and none can start meanwhile), so the store is
 * opened, written and closed here; held, a server runs, and gets the command over its control
 * socket, answering once it is durable. A server still starting has no socket yet, and one that
 * just died leaves the lock free: both are retried until the deadline.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { inspectDataDir, NotWritableDataDirError } from '../store/data-dir'
import { Store } from '../store/store'
import { listSegments } from '../store/wal'
import { SNAPSHOT_FILE } from '../store/paths'
import { acquireDataDirLock, DataDirLockedError, ReadOnlyDataDirError, type DataDirLock } from '../store/lock'
import { readConsistently } from '../store/read-only'
import { EmbeddedStorage } from '../storage/embedded'
import { isInitialised } from './init'
import { performTokenCommand, refuseUnknownIds, type TokenCommand, type TokenCommandAnswer } from './token-commands'
import { ControlSocketUnreachable, outcomeUnknown, sendControlCommand } from './control-socket'

/** How long a command waits for a server that holds the dir to open its control socket. */
const DEADLINE_MS = 30_000
const RETRY_MS = 50

export async function runOnDataDir(dir: string, command: TokenCommand, timing = { deadlineMs: DEADLINE_MS, answerTimeoutMs: undefined as number | undefined }): Promise<TokenCommandAnswer> {
  // A dir keyward must not use is refused before anything is created in it (even the lock file).
  if ((await inspectDataDir(dir)) !== 'keyward') throw notInitialised(dir)
  const deadline = performance.now() + timing.deadlineMs
  /** A server had the command and went without answering: it may have done it (`ControlSocketUnreachable`). */
  let answerLost = false
  for (;;) {
    let lock: DataDirLock | null
    try {
      lock = lockIfFree(dir)
    } catch (error) {
      // No server can be writing through this mount: a list reads the dir as verify does (a server
      // may still write it through another mount, so the read is one that overlapped no compaction).
      if (error instanceof ReadOnlyDataDirError && command.command === 'tokens list') return listReadOnly(dir, command)
      throw error
    }
    if (lock) {
      try {
        return afterLostAnswer(await performHere(dir, command), answerLost)
      } catch (error) {
        // A dir its owner may not write in (chmod u-w): a list reads it as on a read-only mount.
        if (error instanceof NotWritableDataDirError && command.command === 'tokens list') return await listReadOnly(dir, command)
        throw error
      } finally {
        lock.release()
      }
    }
    try {
      // Checked here, after the dir's own refusals: a text that is no id would not pass the socket.
      refuseUnknownIds(command)
      return afterLostAnswer(await sendControlCommand(dir, command, timing.answerTimeoutMs), answerLost)
    } catch (error) {
      if (!(error instanceof ControlSocketUnreachable)) throw error
      answerLost ||= error.mayHaveBeenDone
      if (performance.now() > deadline) {
        const unknown = answerLost && command.command !== 'tokens list' ? `; a server had the command and went without answering, so it may have been done: ${outcomeUnknown(dir, command)}` : ''
        throw new Error(`another keyward holds data dir ${dir} (a server, or a command such as restore), and no control socket answers at ${error.message}${unknown}`)
      }
    }
    await Bun.sleep(RETRY_MS)
  }
}

/**
 * The answer of a command sent again after a server had it and went without answering: a token
 * found revoked then was most likely revoked by that first sending, and the note "was already
 * revoked" (which says nothing changed) would claim what is not known: said as revoked. An
 * `issue-token` sent again finds its own token and answers it issued, as any repeat does.
 */
function afterLostAnswer(answer: TokenCommandAnswer, answerLost: boolean): TokenCommandAnswer {
  return answerLost && 'revoked' in answer && !answer.revoked ? { revoked: true } : answer
}

/** The data-dir lock if no server holds it (the one place the CLI asks whether a server runs). */
function lockIfFree(dir: string): DataDirLock | null {
  try {
    return acquireDataDirLock(dir)
  } catch (error) {
    if (error instanceof DataDirLockedError) return null
    throw error
  }
}

async function performHere(dir: string, command: TokenCommand): Promise<TokenCommandAnswer> {
  // Checked before opening: opening a store starts a log in the dir.
  if (!existsSync(join(dir, SNAPSHOT_FILE)) && (await listSegments(dir)).length === 0) throw notInitialised(dir)
  // A list writes no data, not even the snapshot a store writes on close (a full disk would fail it).
  const storage = new EmbeddedStorage(await Store.open(dir, { readOnly: command.command === 'tokens list' }))
  let answer: TokenCommandAnswer
  try {
    if (!(await isInitialised(storage))) throw notInitialised(dir)
    answer = await performTokenCommand(storage, command)
  } catch (error) {
    await storage.close().catch(() => {})
    throw error
  }
  // The change is durable in the log once made; the snapshot written on close only shortens the
  // next start. Its failure (a full disk) must not report the change as failed: a token shown
  // nowhere would stay issued, and a retry would issue another (docs/storage.md, "Embedded").
  await storage.close().catch((error) => console.error(`keyward: warning: the change is made and durable, but the snapshot written on closing the data dir failed (the next start replays the log): ${(error as Error).message}`))
  return answer
}

async function listReadOnly(dir: string, command: TokenCommand): Promise<TokenCommandAnswer> {
  const { value } = await readConsistently(dir, async () => {
    const storage = new EmbeddedStorage(await Store.open(dir, { readOnly: true, log: () => {} }))
    try {
      if (!(await isInitialised(storage))) throw notInitialised(dir)
      return await performTokenCommand(storage, command)
    } finally {
      await storage.close()
    }
  })
  return value
}

const notInitialised = (dir: string) => new Error(`data dir ${dir} is not initialised: run 'keyward init' first`)
