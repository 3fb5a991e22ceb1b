/**
 * The signing secret on disk: created whole (never partial), checksummed, and any damage refused
 * with the file and offset, never read as some other key.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../support/harness.ts'
import { createSecret, readSecret } from '../../src/auth/secret.ts'
import { isDamageError } from '../../src/store/recovery.ts'

const dirs: string[] = []
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

function newDir(): string {
  const dir = tempDir('keyward-secret-')
  dirs.push(dir)
  return dir
}

async function damage(dir: string): Promise<{ file: string; offset: number; message: string }> {
  const error = await readSecret(dir).then(
    () => null,
    (e: unknown) => e,
  )
  expect(isDamageError(error)).toBe(true)
  return error as { file: string; offset: number; message: string }
}

describe('secret file', () => {
  test('created 0600, as 64 hex digits, a space and their CRC-32; read back as the same 32 bytes', async () => {
    const dir = newDir()
    const secret = await createSecret(dir)
    const text = readFileSync(join(dir, 'secret'), 'utf8')
    expect(text).toMatch(/^[0-9a-f]{64} [0-9a-f]{8}\n$/)
    expect(text.slice(0, 64)).toBe(secret.toString('hex'))
    expect(statSync(join(dir, 'secret')).mode & 0o777).toBe(0o600)
    expect(await readSecret(dir)).toEqual(secret)
    expect(readdirSync(dir)).toEqual(['secret']) // no temporary file left
  })

  test('missing: null (not initialised)', async () => {
    expect(await readSecret(newDir())).toBeNull()
  })

  test('never replaces a secret that is there', async () => {
    const dir = newDir()
    const first = await createSecret(dir)
    await expect(createSecret(dir)).rejects.toThrow()
    expect(await readSecret(dir)).toEqual(first)
  })

  test('a hex digit changed into another hex digit: refused, not read as another key', async () => {
    const dir = newDir()
    await createSecret(dir)
    const path = join(dir, 'secret')
    const text = readFileSync(path, 'utf8')
    writeFileSync(path, `${text.slice(0, 20)}${text[20] === 'a' ? 'b' : 'a'}${text.slice(21)}`)
    const error = await damage(dir)
    expect([error.file, error.offset]).toEqual([path, 0])
    expect(error.message).toContain(path)
    expect(error.message).toContain('checksum')
  })

  test('a byte that is no hex digit, or the file cut short or extended: refused at that offset', async () => {
    const dir = newDir()
    await createSecret(dir)
    const path = join(dir, 'secret')
    const text = readFileSync(path, 'latin1')
    for (const [damaged, offset] of [
      [`${text.slice(0, 30)}\u00e1${text.slice(31)}`, 30],
      [text.slice(0, 40), 40],
      [text.slice(0, 70), 70],
      [`${text}00`, 74],
      ['', 0],
    ] as const) {
      writeFileSync(path, damaged, 'latin1')
      const error = await damage(dir)
      expect([damaged.length, error.offset]).toEqual([damaged.length, offset])
      expect(error.message).toContain(`offset ${offset}`)
    }
  })

  test('64 hex digits alone (written by hand, e.g. openssl rand -hex 32) are accepted', async () => {
    const dir = newDir()
    const hex = 'ab'.repeat(32)
    writeFileSync(join(dir, 'secret'), `${hex}\n`, { mode: 0o600 }) // as (umask 077; openssl rand -hex 32 > secret) does
    expect((await readSecret(dir))!.toString('hex')).toBe(hex)
    writeFileSync(join(dir, 'secret'), hex)
    expect((await readSecret(dir))!.toString('hex')).toBe(hex)
  })
})
