/**
 * CONTRACT section 1: `serve --public-url` / KEYWARD_PUBLIC_URL set the host_url handed to new
 * applications (default http://<host>:<port>), and `--auto-verify-installations` /
 * KEYWARD_AUTO_VERIFY_INSTALLATIONS=1 make new installations start verified.
 */
import { afterEach, expect, test } from 'bun:test'
import { tempDir } from '../support/harness'
import { initLine, killServers, startServer, stopServer, type ServeOptions } from '../support/server-process'

afterEach(killServers)

async function firstApplicationAndInstallation(options: ServeOptions) {
  const server = await startServer(`${tempDir('keyward-serve-options-')}/data`, options)
  const { organization_id: vendor, token } = initLine(server)
  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    expect(res.status).toBe(201)
    return (await res.json()) as Record<string, Record<string, string>>
  }
  const customer = (await post('/api/organizations', { description: 'Acme', parent_id: vendor })).organization!.organization_id
  const application = (await post('/api/applications', { organization_id: customer, description: 'App' })).application!
  const installation = (await post('/api/installations', { installation_id: crypto.randomUUID(), description: 'Phone', organization_id: customer }))
    .installation!
  expect(await stopServer(server, 'SIGTERM')).toBe(0)
  return { url: server.url, hostUrl: application.host_url, installationState: installation.state }
}

test('by default host_url is the address served and installations start unregistered', async () => {
  const { url, hostUrl, installationState } = await firstApplicationAndInstallation({})
  expect(hostUrl).toBe(url)
  expect(installationState).toBe('unregistered')
})

test('the flags --public-url and --auto-verify-installations', async () => {
  const result = await firstApplicationAndInstallation({
    wrap: (command) => [...command, '--public-url', 'https://flag.example', '--auto-verify-installations'],
  })
  expect(result.hostUrl).toBe('https://flag.example')
  expect(result.installationState).toBe('verified')
})

test('the environment variables KEYWARD_PUBLIC_URL and KEYWARD_AUTO_VERIFY_INSTALLATIONS=1', async () => {
  const result = await firstApplicationAndInstallation({
    env: { KEYWARD_PUBLIC_URL: 'https://env.example', KEYWARD_AUTO_VERIFY_INSTALLATIONS: '1' },
  })
  expect(result.hostUrl).toBe('https://env.example')
  expect(result.installationState).toBe('verified')
})
