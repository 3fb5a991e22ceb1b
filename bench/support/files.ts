/** File chores of the benchmarks: durable copies, and flushing what others left in the page cache. */
import { mkdir, open, readdir } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * Copies the files of `from` (one level, as a keyward data dir is) into `to`, fsyncing each, so
 * that the kernel's writeback of the copy does not land in a later measurement.
 */
export async function copyDirDurably(from: string, to: string): Promise<number> {
  await mkdir(to, { recursive: true, mode: 0o700 })
  let bytes = 0
  for (const entry of await readdir(from, { withFileTypes: true })) {
    if (!entry.isFile()) continue
    const source = await open(join(from, entry.name), 'r')
    const target = await open(join(to, entry.name), 'w', 0o600)
    try {
      const buffer = Buffer.allocUnsafe(4 << 20)
      for (;;) {
        const { bytesRead } = await source.read(buffer, 0, buffer.length)
        if (bytesRead === 0) break
        let written = 0
        while (written < bytesRead) written += (await target.write(buffer, written, bytesRead - written)).bytesWritten
        bytes += bytesRead
      }
      await target.sync()
    } finally {
      await source.close()
      await target.close()
    }
  }
  const dir = await open(to, 'r')
  try {
    await dir.sync()
  } finally {
    await dir.close()
  }
  return bytes
}

/** `sync`: writes out every dirty page of the machine (bounded); answers the seconds it took. */
export async function syncAll(timeoutMs = 60_000): Promise<number> {
  const started = performance.now()
  const proc = Bun.spawn(['sync'], { stdin: 'ignore', stdout: 'ignore', stderr: 'ignore' })
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs)
  await proc.exited
  clearTimeout(timer)
  return (performance.now() - started) / 1000
}
