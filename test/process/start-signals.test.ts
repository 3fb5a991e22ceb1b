/**
 * Signals while `serve` starts (src/cli/serving.ts, `listenForSignals`): opening a big data dir takes
 * a while, and a stop asked for then stops the server as soon as the dir is open (exit 0, its
 * snapshot written) instead of killing it; a SIGUSR1 then is logged and does nothing.
 */
import { afterEach, expect, test } from 'bun:test'
import { tempDir } from '../support/temp-dirs'
import { keyward, killServers, spawnServer, startServer, stopServer, api, waitFor } from '../support/server-process'
import { Store } from '../../src/store/store'
import { EmbeddedStorage } from '../../src/storage/embedded'

afterEach(killServers)

/** Consumers written straight into the dir's log: replaying them takes the start a moment. */
const CONSUMERS = 150_000

test('SIGUSR1 and then SIGTERM while the data dir is recovered: logged, then a graceful stop without serving, exit 0; nothing lost', async () => {
  const data = `${tempDir('keyward-start-signals-')}/data`
  const init = await keyward(['init', '--data', data])
  expect(init.code).toBe(0)
  const { organization_id: vendor, token } = JSON.parse(init.stdout)
  const storage = new EmbeddedStorage(await Store.open(data))
  const customer = crypto.randomUUID()
  await storage.transaction((tx) => tx.insert('organizations', { organization_id: customer, parent_id: vendor, organization_type: 'customer', description: 'Big', state: 'active', environments: null }))
  for (let done = 0; done < CONSUMERS; done += 1000) {
    await storage.transaction((tx) => Promise.all(Array.from({ length: 1000 }, () => tx.insert('consumers', { consumer_id: crypto.randomUUID(), organization_id: customer, state: 'active' }))))
  }
  await storage.close()

  const server = spawnServer(data)
  await waitFor('the starting line', () => server.stderr.text.includes('"msg":"starting"'), server.proc)
  server.proc.kill('SIGUSR1')
  server.proc.kill('SIGTERM')
  expect(await stopServer(server, null)).toBe(0)
  const lines = server.stderr.text.trim().split('\n').map((line) => JSON.parse(line).msg as string)
  // Both signals came before the dir was open; the server never listened, and stopped cleanly.
  expect(lines).toContain('SIGUSR1: still starting; nothing done')
  expect(lines).toContain('SIGTERM: stopping as soon as the storage is open')
  expect(lines).toContain('recovered')
  expect(lines).not.toContain('listening')
  expect(lines.at(-1)).toBe('stopped')

  const again = await startServer(data)
  expect((await api(again.url, token, 'GET', `/api/consumers?organization_ids=${customer}&page=1&page_size=1`)).body.total).toBe(CONSUMERS)
  expect(await stopServer(again, 'SIGTERM')).toBe(0)
})
