/**
 * `serve --cors-origin` (repeatable) and KEYWARD_CORS_ORIGIN (comma-separated) over real HTTP, through
 * Bun's router; a value that is not an origin is a usage error (exit 2). The answers themselves are
 * tested in test/http/cors.test.ts.
 */
import { afterEach, expect, test } from 'bun:test'
import { tempDir } from '../support/temp-dirs'
import { keywardCommand, killServers, run, startServer, stopServer } from '../support/server-process'

afterEach(killServers)

const preflight = (url: string, origin: string) =>
  fetch(`${url}/api/consumers`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } })

test('the flag, repeated, and the environment variable allow exactly the origins given', async () => {
  const byFlag = await startServer(`${tempDir('keyward-cors-')}/data`, {
    wrap: (command) => [...command, '--cors-origin', 'https://a.example', '--cors-origin', 'http://127.0.0.1:5173'],
  })
  const byEnv = await startServer(`${tempDir('keyward-cors-')}/data`, { env: { KEYWARD_CORS_ORIGIN: 'https://a.example, http://127.0.0.1:5173' } })
  for (const server of [byFlag, byEnv]) {
    for (const origin of ['https://a.example', 'http://127.0.0.1:5173']) {
      const res = await preflight(server.url, origin)
      expect(res.status).toBe(204)
      expect(res.headers.get('access-control-allow-origin')).toBe(origin)
      const health = await fetch(`${server.url}/healthz`, { headers: { origin } })
      expect(health.headers.get('access-control-allow-origin')).toBe(origin)
    }
    expect((await preflight(server.url, 'https://b.example')).status).toBe(404)
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  }
})

test('a value that is not an origin is exit 2 with a message', async () => {
  for (const value of ['console.example.com', 'https://a.example/path', 'ftp://a.example']) {
    const result = await run(keywardCommand(['serve', '--data', `${tempDir('keyward-cors-')}/data`, '--port', '0', '--cors-origin', value]))
    expect({ value, code: result.code }).toEqual({ value, code: 2 })
    expect(result.stderr).toContain('invalid --cors-origin')
  }
})
