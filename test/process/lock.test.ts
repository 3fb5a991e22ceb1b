/**
 * The data dir lock across PID namespaces (README "The data dir"), as two containers on one
 * volume run it: each server is PID 1 of its own namespace, so no process id can tell them apart.
 * The second `serve` (and `init`) is refused; the first keeps serving and loses nothing.
 */
import { afterEach, expect, setDefaultTimeout, test } from 'bun:test'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { tempDir } from '../support/temp-dirs'
import { LOCK_FILE } from '../../src/store/lock.ts'
import {
  api,
  canUsePidNamespaces,
  initLine,
  inNewPidNamespace,
  isDataDirLocked,
  keywardCommand,
  killServers,
  run,
  startServer,
  stopServer,
  waitFor,
} from '../support/server-process.ts'

setDefaultTimeout(15000)

const dirs: string[] = []

afterEach(async () => {
  await killServers()
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

test.skipIf(!canUsePidNamespaces())('two servers in different PID namespaces on one data dir: the second exits 1, the first keeps serving', async () => {
  const parent = tempDir('keyward-lock-')
  dirs.push(parent)
  const data = join(parent, 'data')
  const first = await startServer(data, { wrap: inNewPidNamespace })
  const { organization_id: vendorId, token } = initLine(first)

  const second = await run(inNewPidNamespace(keywardCommand(['serve', '--data', data, '--port', '0'])))
  expect(second.code).toBe(1)
  expect(second.stdout).toBe('')
  // serve's failure is a line of its JSON log (docs/operations.md).
  expect(JSON.parse(second.stderr.trim().split('\n').at(-1)!)).toMatchObject({
    level: 'error',
    msg: 'failed',
    error: expect.stringContaining(`data dir ${data} is already in use by another running keyward`),
  })
  const init = await run(inNewPidNamespace(keywardCommand(['init', '--data', data])))
  expect(init.code).toBe(1)
  expect(init.stderr).toContain(`keyward: data dir ${data} is already in use by another running keyward`)

  const customer = await api(first.url, token, 'POST', '/api/organizations', { description: 'Acme', parent_id: vendorId })
  expect(customer.status).toBe(201)

  // Killed outright, the first gives the lock up with its life; a third server has every acknowledged write.
  expect(await stopServer(first, 'SIGKILL')).toBe(-9)
  // (The server, PID 1 of its namespace, dies just after the wrapper we waited for.)
  await waitFor('the killed server to be gone', () => !isDataDirLocked(data))
  const third = await startServer(data, { wrap: inNewPidNamespace })
  const read = await api(third.url, token, 'GET', `/api/organizations/${customer.body.organization.organization_id}`)
  expect([read.status, read.body.organization.description]).toEqual([200, 'Acme'])
  expect(await stopServer(third, 'SIGKILL')).toBe(-9)
})

test("serve.lock deleted under a running server: a second serve is still refused, a token command goes to the server, and after kill -9 every acknowledged write is there", async () => {
  const parent = tempDir('keyward-lock-')
  dirs.push(parent)
  const data = join(parent, 'data')
  const first = await startServer(data)
  const { organization_id: vendorId, token } = initLine(first)
  const before = await api(first.url, token, 'POST', '/api/organizations', { description: 'before', parent_id: vendorId })
  expect(before.status).toBe(201)

  rmSync(join(data, LOCK_FILE))
  const second = await run(keywardCommand(['serve', '--data', data, '--port', '0']))
  expect([second.code, second.stderr]).toEqual([1, expect.stringContaining(`data dir ${data} is already in use by another running keyward`)])
  // Not done by the CLI itself (which would write a snapshot and remove the log the server appends to): by the server.
  const issued = await run(keywardCommand(['issue-token', '--data', data, '--org', vendorId, '--role', 'viewer']))
  expect(issued.code).toBe(0)
  expect((await api(first.url, issued.stdout.trim(), 'GET', '/api/organizations')).status).toBe(200)
  const after = await api(first.url, token, 'POST', '/api/organizations', { description: 'after', parent_id: vendorId })
  expect(after.status).toBe(201)

  expect(await stopServer(first, 'SIGKILL')).toBe(-9)
  await waitFor('the killed server to be gone', () => !isDataDirLocked(data))
  const third = await startServer(data)
  for (const created of [before, after]) {
    const read = await api(third.url, token, 'GET', `/api/organizations/${created.body.organization.organization_id}`)
    expect([read.status, read.body.organization.description]).toEqual([200, created.body.organization.description])
  }
  expect((await api(third.url, issued.stdout.trim(), 'GET', '/api/organizations')).status).toBe(200)
  expect(await stopServer(third, 'SIGKILL')).toBe(-9)
}, 45_000)
