import { open } from 'node:fs/promises'

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
