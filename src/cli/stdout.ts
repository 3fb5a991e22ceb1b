/**
 * The line a command shows a secret on (a token, once). Written synchronously, so that a stdout
 * that cannot take it (a full disk, a closed pipe) is the command's own failure, saying what became
 * of the secret and what to do, instead of a stack trace after the command has finished. A stdout
 * that is the null device is one too: Bun opens /dev/null where stdout was closed (`>&-`), so
 * writing there "succeeds" and the secret is gone without a word.
 */
import { fstatSync, statSync, writeSync } from 'node:fs'
import type { Logger } from '../ops/logger'
import { withoutSecrets } from '../ops/redact'

/**
 * Before a command makes a secret (`init`, `issue-token`): a stdout that is the null device could
 * not show it, so the command does nothing and says so (`what`: the secret, for the message).
 */
export function requireStdoutForSecret(what: string, instead: string): void {
  if (stdoutIsNullDevice()) throw new Error(`stdout is /dev/null (closed, or sent there), so it cannot show ${what}: ${instead}; send stdout to a terminal, a file or a pipe`)
}

/** Writes `line` to stdout; throws an error saying `lost` (what to do now) if it cannot. */
export function printSecretLine(line: string, lost: string): void {
  if (stdoutIsNullDevice()) throw new Error(`stdout is /dev/null (closed, or sent there), so it cannot show a secret: ${lost}`)
  try {
    writeAllToStdout(line)
  } catch (error) {
    throw new Error(`${stdoutFailure(error)}: ${lost}`)
  }
}

/** What a failed write to stdout says: `could not write to stdout (ENOSPC)`. */
export const stdoutFailure = (error: unknown) => `could not write to stdout (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`

/**
 * Writes all of `text` to stdout, synchronously. A stdout left non-blocking by whoever started us
 * and full for now (EAGAIN) takes the same bytes shortly; any other failure is thrown.
 */
function writeAllToStdout(text: string): void {
  const bytes = Buffer.from(text)
  for (let written = 0; written < bytes.length; ) {
    try {
      written += writeSync(1, bytes, written)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error
      Bun.sleepSync(1)
    }
  }
}

/**
 * Writes a command's output (not a secret: `printSecretLine`) to stdout. A reader that has gone
 * (`keyward tokens list | head -1`, `keyward --help | true`) wants no more of it: the command goes on
 * to its own exit code instead of ending in a stack trace and exit 1.
 */
export function printOutput(text: string): void {
  try {
    writeAllToStdout(text)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPIPE') throw error
  }
}

/**
 * A command's last line, once its work is done (`done`: what it did): a stdout that cannot take it
 * (a full disk) fails the command saying the work was done, not as if it had failed.
 */
export function printDone(text: string, done: string): void {
  try {
    // It names the paths it was given, which may be a secret put in the wrong place (src/ops/redact.ts).
    printOutput(withoutSecrets(text))
  } catch (error) {
    throw new Error(`${stdoutFailure(error)}, but ${done}`)
  }
}

function stdoutIsNullDevice(): boolean {
  try {
    const stdout = fstatSync(1)
    return stdout.isCharacterDevice() && stdout.rdev === statSync('/dev/null').rdev
  } catch {
    return false // no stdout to look at: the write below says what is wrong
  }
}

/** What to do when the first token could not be shown: the store is initialised, and only the CLI can make another. */
export const notShown = (vendorId: string, store: string) =>
  `initialised, but the vendor admin token was not shown: issue one with keyward issue-token ${store} --org ${vendorId} --role admin`

/**
 * `serve`'s first start prints the vendor token (`first`) like `init`; if stdout cannot take it the
 * server serves on (a token can be issued beside it), and its log says so instead of "on stdout".
 */
export function printFirstToken(first: { organization_id: string }, logger: Logger, store: string, where: string): void {
  try {
    printSecretLine(JSON.stringify(first) + '\n', notShown(first.organization_id, store))
    logger.info(`initialised ${where}; the vendor admin token is on stdout, shown once: keep it`)
  } catch (error) {
    logger.error((error as Error).message, { organization_id: first.organization_id })
  }
}
