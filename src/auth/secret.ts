/**
 * The data dir's token-signing secret: 32 random bytes, created once by `init`, mode 0600.
 * Whoever can read it can mint tokens, so it never leaves the data dir and is never logged.
 *
 * The file is one line: 64 hex digits, a space and their CRC-32 in 8 hex digits. The checksum makes
 * a damaged secret a refused start rather than a server that quietly signs with other bytes. A line
 * of just the 64 hex digits (a secret an operator wrote by hand) is accepted too.
 */
import { randomBytes } from 'node:crypto'
import { constants, link, open, readFile, rm } from 'node:fs/promises'
import type { Stats } from 'node:fs'
import { join } from 'node:path'
import { SECRET_FILE } from '../store/paths'
import { fsyncDir, isErrnoCode } from '../store/fs-util'
import { RecoveryDamageError } from '../store/recovery'
import { DataDirError } from '../store/data-dir'

const SECRET_LINE = /^([0-9a-f]{64})(?: ([0-9a-f]{8}))?\n?$/

const checksum = (hex: string) => Bun.hash.crc32(hex).toString(16).padStart(8, '0')

export async function createSecret(dir: string): Promise<Buffer> {
  const secret = randomBytes(32)
  const path = join(dir, SECRET_FILE)
  const temporary = `${path}.tmp`
  const hex = secret.toString('hex')
  // Written whole under a temporary name first: a crash (or a full disk) never leaves a partial
  // secret behind, which would make the data dir refuse to start.
  await rm(temporary, { force: true })
  try {
    const file = await open(temporary, 'wx', 0o600)
    try {
      await file.writeFile(`${hex} ${checksum(hex)}\n`)
      await file.sync()
    } finally {
      await file.close()
    }
    await link(temporary, path) // unlike rename, never replaces a secret that is already there
  } finally {
    await rm(temporary, { force: true })
  }
  await fsyncDir(dir)
  return secret
}

/**
 * Null when the dir has not been initialised; a RecoveryDamageError naming the offset when damaged;
 * a DataDirError when the file is not one only its owner controls (see `checkSecretFile`).
 */
export async function readSecret(dir: string): Promise<Buffer | null> {
  const path = join(dir, SECRET_FILE)
  let file
  try {
    file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW)
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return null
    if (isErrnoCode(error, 'ELOOP')) throw new DataDirError(`${path} is a symbolic link: keyward reads its secret only from a regular file there (mode 0600)`)
    throw error
  }
  let text: string
  try {
    checkSecretFile(path, await file.stat()) // of the file opened, so it cannot be swapped in between
    text = await file.readFile('latin1') // one character per byte, so offsets are byte offsets
  } finally {
    await file.close()
  }
  const match = SECRET_LINE.exec(text)
  if (!match) throw new RecoveryDamageError(path, firstBadByte(text), 'not a keyward secret (64 hex digits, a space, their CRC-32 in 8 hex digits)')
  const [, hex, sum] = match
  if (sum !== undefined && sum !== checksum(hex!)) throw new RecoveryDamageError(path, 0, 'the secret does not match its checksum')
  return Buffer.from(hex!, 'hex')
}

/**
 * Whoever can write the secret can mint any token, and whoever can read it too: it must be a regular
 * file of the user running keyward, with no permission for anyone else (the contract, section 12).
 */
function checkSecretFile(path: string, info: Stats): void {
  if (!info.isFile()) throw new DataDirError(`${path} is not a regular file`)
  const uid = process.getuid!()
  if (info.uid !== uid) {
    throw new DataDirError(
      `${path} is owned by uid ${info.uid}, not by uid ${uid} that runs keyward: whoever owns it can mint tokens; ` +
        `if it is the secret you created, chown it to uid ${uid}, otherwise replace it (every token is then void)`,
    )
  }
  const mode = info.mode & 0o777
  if ((mode & 0o077) !== 0) {
    throw new DataDirError(
      `${path} has mode ${mode.toString(8).padStart(4, '0')}, open to other users: chmod 600 it; ` +
        `if others may have read it, replace it (every token is then void)`,
    )
  }
}

/** Where `text` stops looking like `<64 hex digits> <8 hex digits>\n` (it does not match it). */
function firstBadByte(text: string): number {
  const hexRun = (from: number, to: number) => {
    let i = from
    while (i < to && /^[0-9a-f]$/.test(text[i] ?? '')) i++
    return i
  }
  const key = hexRun(0, 64)
  if (key < 64) return key
  if (text[64] === '\n') return 65 // something after the line
  if (text[64] !== ' ') return 64
  const sum = hexRun(65, 73)
  if (sum < 73) return sum
  return text[73] === '\n' ? 74 : 73
}

/**
 * Whether the secret file carries its checksum, as every secret `init` wrote from data format 2 on
 * (null without a readable secret line). Tells the format of a dir written before the `format`
 * file existed (src/store/format.ts); a secret written by hand has none in either format.
 */
export async function secretHasChecksum(dir: string): Promise<boolean | null> {
  const text = await readFile(join(dir, SECRET_FILE), 'latin1').catch((error) => (isErrnoCode(error, 'ENOENT') ? null : Promise.reject(error)))
  const match = text === null ? null : SECRET_LINE.exec(text)
  return match ? match[2] !== undefined : null
}
