/**
 * `kill -USR1 <serve pid>` writes a snapshot while the server keeps serving: the log it covers is
 * dropped, and a restart after SIGKILL reads everything back from that snapshot.
 */
import { afterEach, expect, test } from 'bun:test'
import { readdirSync } from 'node:fs'
import { tempDir } from '../support/temp-dirs'
import { api, initLine, killServers, startServer, stopServer, waitFor } from '../support/server-process'

afterEach(killServers)

const logSegments = (data: string) => readdirSync(data).filter((name) => /^wal-.*\.log$/.test(name))

test('SIGUSR1 writes a snapshot while serving; a second one finds it current', async () => {
  const data = `${tempDir('keyward-snapshot-signal-')}/data`
  const server = await startServer(data)
  const { organization_id: vendor, token } = initLine(server)
  const created = await api(server.url, token, 'POST', '/api/organizations', { description: 'Acme', parent_id: vendor })
  expect(created.status).toBe(201)
  const segmentsBefore = logSegments(data)

  server.proc.kill('SIGUSR1')
  await waitFor('the snapshot line', () => /snapshot written/.test(server.stderr.text), server.proc)
  // Still serving, and the segments the snapshot covers are gone (a new one took over).
  expect((await api(server.url, token, 'GET', `/api/organizations/${created.body.organization.organization_id}`)).status).toBe(200)
  expect(logSegments(data).some((name) => segmentsBefore.includes(name))).toBe(false)

  server.proc.kill('SIGUSR1')
  await waitFor('the current line', () => /snapshot is already current/.test(server.stderr.text), server.proc)

  expect(await stopServer(server, 'SIGKILL')).toBe(-9)
  const again = await startServer(data)
  const read = await api(again.url, token, 'GET', `/api/organizations/${created.body.organization.organization_id}`)
  expect(read.status).toBe(200)
  expect(read.body.organization.description).toBe('Acme')
  expect(await stopServer(again, 'SIGTERM')).toBe(0)
})
