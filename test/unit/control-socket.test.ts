/**
 * The control socket's file (src/cli/control-socket.ts, README "Tokens"): owner-only from the moment
 * it exists. Made and then chmod'ed, it was open to the dir's group and others in between, under a
 * umask such as 002, and a connection made then was kept after the chmod (review, 2026-11-30).
 */
import { expect, spyOn, test } from 'bun:test'
import { statSync } from 'node:fs'
import { controlSocketPath, serveControlSocket } from '../../src/cli/control-socket'
import { memoryLogger } from '../../src/ops/logger'
import { tempDir } from '../support/temp-dirs'

test('the control socket is made owner-only, whatever the umask: never open to others before its chmod', async () => {
  const dir = tempDir()
  const serve = Bun.serve
  let modeAtCreation: number | undefined
  const made = spyOn(Bun, 'serve').mockImplementation(((options: Parameters<typeof Bun.serve>[0]) => {
    const server = serve(options)
    modeAtCreation = statSync(controlSocketPath(dir)).mode & 0o777
    return server
  }) as typeof Bun.serve)
  const umask = process.umask(0)
  let socket: ReturnType<typeof serveControlSocket> = null
  try {
    socket = serveControlSocket(dir, async () => ({ tokens: [] }) as never, memoryLogger())
  } finally {
    process.umask(umask)
    made.mockRestore()
  }
  try {
    expect(modeAtCreation).toBeDefined()
    expect(modeAtCreation! & 0o077).toBe(0)
    expect(statSync(controlSocketPath(dir)).mode & 0o777).toBe(0o600)
    // The process's own umask is given back.
    expect(process.umask()).toBe(umask)
  } finally {
    await socket?.stop(0)
  }
})
