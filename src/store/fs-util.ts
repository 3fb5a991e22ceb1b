import { open, type FileHandle } from 'node:fs/promises'

/** Makes a directory's entries (a created, renamed or removed file) durable. */
export async function fsyncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** A failed file operation's error code (ENOENT, EEXIST, ...). */
export function isErrnoCode(error: unknown, code: string): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === code
}

/**
 * The code of an error that says this user may not write there (EACCES, EROFS), or undefined: for a
 * message that says so instead of the bare error (a data dir to create, a backup's directory).
 */
export function notWritableCode(error: unknown): 'EACCES' | 'EROFS' | undefined {
  return isErrnoCode(error, 'EACCES') ? 'EACCES' : isErrnoCode(error, 'EROFS') ? 'EROFS' : undefined
}

/** Fills `into` from `position` of the file; a file that ends first is an error. */
export async function readExactly(handle: FileHandle, into: Uint8Array, position: number): Promise<void> {
  let done = 0
  while (done < into.length) {
    const { bytesRead } = await handle.read(into, done, into.length - done, position + done)
    if (bytesRead === 0) throw new Error(`unexpected end of file at ${position + done}`)
    done += bytesRead
  }
}
