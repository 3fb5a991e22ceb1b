/**
 * The data dir's token-signing secret: 32 random bytes, created once by `init`, mode 0600.
 * Whoever can read it can mint tokens, so it never leaves the data dir and is never logged.
 */
import { randomBytes } from 'node:crypto'
import { open, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { SECRET_FILE } from '../store/paths'
import { fsyncDir } from '../store/fs-util'

export async function createSecret(dir: string): Promise<Buffer> {
  const secret = randomBytes(32)
  const file = await open(join(dir, SECRET_FILE), 'wx', 0o600)
  try {
    await file.writeFile(secret.toString('hex') + '\n')
    await file.sync()
  } finally {
    await file.close()
  }
  await fsyncDir(dir)
  return secret
}

/** Null when the dir has not been initialised. */
export async function readSecret(dir: string): Promise<Buffer | null> {
  let text: string
  try {
    text = await readFile(join(dir, SECRET_FILE), 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw error
  }
  const hex = text.trim()
  if (!/^[0-9a-f]{64}$/.test(hex)) throw new Error(`${join(dir, SECRET_FILE)} is not a keyward secret`)
  return Buffer.from(hex, 'hex')
}
