/**
 * The control socket of a running server (README "Tokens"): `control.sock` in the data dir, mode
 * 0600 inside the 0700 dir, so only the dir's owner reaches it. The CLI hands it the token commands
 * while the server holds the data dir (the server is then the dir's only writer); the server runs
 * each as an ordinary transaction with its audit event and answers once the change is durable.
 *
 * HTTP over the Unix socket: one POST with the command as JSON, answered
 * `{"answer": ...}`, or `{"unknown": message}` (exit 2), or `{"failed": message}` (exit 1).
 */
import type { Logger } from '../ops/logger'
import { chmodSync, closeSync, existsSync, openSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import * as v from 'valibot'
import { isErrnoCode } from '../store/fs-util'
import { settledWithin } from '../ops/deadline'
import { TokenCommand, UnknownRecordError, type TokenCommandAnswer } from './token-commands'

export const CONTROL_SOCKET_FILE = 'control.sock'
/** A command is a few hundred bytes; nothing bigger is read. */
const MAX_REQUEST_BYTES = 16 * 1024
/** The kernel's limit on a socket's path (sun_path, with its terminating zero). */
const MAX_SOCKET_PATH_BYTES = 107
const tooLong = (dir: string) => `${controlSocketPath(dir)} is longer than ${MAX_SOCKET_PATH_BYTES} bytes`

export const controlSocketPath = (dir: string) => join(dir, CONTROL_SOCKET_FILE)

/**
 * A path to `dir`'s control socket that the kernel takes (a socket's path holds at most 107 bytes),
 * and what to close once done with it: the path itself, or for a longer one on Linux the same file
 * through a descriptor of the dir (`/proc/self/fd/N/control.sock`, resolved by the kernel like any
 * path), so that a data dir deep in a tree still has its socket. Null where neither works.
 */
function socketAddress(dir: string): { readonly path: string; close(): void } | null {
  const path = controlSocketPath(dir)
  if (Buffer.byteLength(path) <= MAX_SOCKET_PATH_BYTES) return { path, close: () => {} }
  if (!existsSync('/proc/self/fd')) return null
  const fd = openSync(dir, 'r')
  return { path: `/proc/self/fd/${fd}/${CONTROL_SOCKET_FILE}`, close: () => closeSync(fd) }
}

type Perform = (command: TokenCommand) => Promise<TokenCommandAnswer>

export interface ControlSocket {
  /**
   * Stops taking commands and lets those in flight finish, for `timeoutMs` at most (`--stop-timeout`,
   * as the API's answers get); then closes their connections. Once done, the same promise again.
   */
  stop(timeoutMs: number): Promise<void>
}

/**
 * Listens on the data dir's control socket; the caller holds the data dir's lock, so a socket file
 * already there was left by a server that died and is removed first. Null (with a warning) when the
 * dir's path is too long for a socket and the system has no /proc: the server still serves, and
 * the CLI says why it cannot reach it.
 */
export function serveControlSocket(dir: string, perform: Perform, logger: Logger): ControlSocket | null {
  try {
    rmSync(controlSocketPath(dir), { force: true })
  } catch (error) {
    // A directory of that name (made by hand): what to do about it, rather than rm's error.
    if (isErrnoCode(error, 'ERR_FS_EISDIR') || isErrnoCode(error, 'EISDIR')) throw new Error(`${controlSocketPath(dir)} is a directory: keyward makes its control socket there; remove it`)
    throw error
  }
  const address = socketAddress(dir)
  if (address === null) {
    logger.warn(`no control socket: ${tooLong(dir)}; issue-token and tokens will not work beside this server`)
    return null
  }
  // Made owner-only (umask 077), not made and then chmod'ed: a dir its owner opened to others (README
  // "The data dir") let another user connect in between and keep the connection (review, 2026-11-30).
  const umask = process.umask(0o077)
  let server: ReturnType<typeof Bun.serve>
  try {
    server = listen(address.path, perform, logger)
  } finally {
    process.umask(umask)
  }
  chmodSync(address.path, 0o600)
  let stopped: Promise<void> | undefined
  const stop = async (timeoutMs: number) => {
    try {
      // An idle connection held a stop until Bun's idle timeout, a slow reader of a long token list as long as it read.
      if (await settledWithin(server.stop(false), timeoutMs)) return
      if (timeoutMs > 0) logger.warn(`stop: control socket connections still open after ${timeoutMs / 1000} s (--stop-timeout): they are closed`, { pending: server.pendingRequests })
      await server.stop(true)
    } finally {
      address.close()
    }
  }
  return { stop: (timeoutMs) => (stopped ??= stop(timeoutMs)) }
}

/** The control socket's server at `path`: one POST per command (see the top of this file). */
function listen(path: string, perform: Perform, logger: Logger): ReturnType<typeof Bun.serve> {
  return Bun.serve({
    unix: path,
    development: false,
    maxRequestBodySize: MAX_REQUEST_BYTES,
    fetch: async (request) => {
      let command: TokenCommand
      try {
        command = v.parse(TokenCommand, await request.json())
      } catch {
        return Response.json({ failed: 'not a keyward control command' }, { status: 400 })
      }
      try {
        return Response.json({ answer: await perform(command) })
      } catch (error) {
        if (error instanceof UnknownRecordError) return Response.json({ unknown: error.message }, { status: 404 })
        logger.error(`control socket: ${command.command} failed`, { error: (error as Error)?.message ?? String(error) })
        return Response.json({ failed: (error as Error)?.message ?? String(error) }, { status: 500 })
      }
    },
  })
}

/** How long a command waits for the server's answer: a change takes milliseconds; a server stopped (SIGSTOP) or stuck never answers. */
const ANSWER_TIMEOUT_MS = 30_000

/**
 * Nobody listens there (no socket file, or one a dead server left: the server is starting or gone),
 * or the server closed the connection unanswered (it is stopping, or died). The command is sent
 * again, or done by the CLI once the dir is free: every command may be (`TokenCommand`: a token is
 * made by the CLI, so the same one is recorded once; a revocation or a list changes nothing the
 * second time). `mayHaveBeenDone`: the server had the command (the connection was closed after it
 * was sent), so it may have been done before the server went.
 */
export class ControlSocketUnreachable extends Error {
  constructor(
    path: string,
    readonly mayHaveBeenDone: boolean,
  ) {
    super(path)
  }
}

/** What to look for in `tokens list` when a change's outcome is unknown: the token it names. */
export function outcomeUnknown(dir: string, command: Exclude<TokenCommand, { command: 'tokens list' }>): string {
  const check = `check with keyward tokens list --data ${dir}`
  if (command.command === 'issue-token') return `${check} whether token ${command.token_id} was recorded (if it was, revoke it: its secret was never shown)`
  return `${check} whether token ${command.token_id} is revoked`
}

/** Sends `command` to the server holding `dir`; resolves once the server has made it durable. */
export async function sendControlCommand(dir: string, command: TokenCommand, answerTimeoutMs = ANSWER_TIMEOUT_MS): Promise<TokenCommandAnswer> {
  const address = socketAddress(dir)
  if (address === null) throw new Error(`a server holds data dir ${dir}, but its control socket ${tooLong(dir)}: run this command on a shorter path to the dir`)
  let response: Response
  try {
    response = await fetch('http://keyward/control', {
      unix: address.path,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(command),
      signal: AbortSignal.timeout(answerTimeoutMs),
    })
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT') || isErrnoCode(error, 'ECONNREFUSED')) throw new ControlSocketUnreachable(controlSocketPath(dir), false)
    if (isErrnoCode(error, 'ECONNRESET')) throw new ControlSocketUnreachable(controlSocketPath(dir), true)
    if ((error as Error)?.name === 'TimeoutError') {
      // A list changes nothing: only a change may still be made once the server goes on.
      const unknown = command.command === 'tokens list' ? '' : `; the command may or may not have been done, now or once the server goes on: ${outcomeUnknown(dir, command)}`
      throw new Error(`the server holding data dir ${dir} did not answer on its control socket within ${answerTimeoutMs / 1000} s (is it stopped or stuck?)${unknown}`)
    }
    throw error
  } finally {
    address.close()
  }
  const reply = (await response.json()) as { answer?: TokenCommandAnswer; unknown?: string; failed?: string }
  if (reply.answer) return reply.answer
  if (reply.unknown) throw new UnknownRecordError(reply.unknown)
  throw new Error(`the server could not do it: ${reply.failed ?? response.status}`)
}
