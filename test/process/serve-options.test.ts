/**
 * README "Configuration" and docs/operations.md: `serve --public-url` / KEYWARD_PUBLIC_URL set the host_url handed to
 * new applications (default http://<host>:<port>), an absolute http or https URL, else a usage error;
 * a wildcard host without it is warned about. `--auto-verify-installations` /
 * KEYWARD_AUTO_VERIFY_INSTALLATIONS=1 make new installations start verified.
 */
import { afterEach, expect, test } from 'bun:test'
import { existsSync, rmSync } from 'node:fs'
import { tempDir } from '../support/temp-dirs'
import { initLine, keywardCommand, killServers, run, startServer, stopServer, type ServeOptions } from '../support/server-process'

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

test('KEYWARD_AUTO_VERIFY_INSTALLATIONS takes true and false too; anything else is bad usage (exit 2), not silently off', async () => {
  expect((await firstApplicationAndInstallation({ env: { KEYWARD_AUTO_VERIFY_INSTALLATIONS: 'True' } })).installationState).toBe('verified')
  expect((await firstApplicationAndInstallation({ env: { KEYWARD_AUTO_VERIFY_INSTALLATIONS: 'false' } })).installationState).toBe('unregistered')
  const data = `${tempDir('keyward-serve-options-')}/data`
  const result = await run(keywardCommand(['serve', '--data', data, '--port', '0']), { KEYWARD_AUTO_VERIFY_INSTALLATIONS: 'ture' })
  expect([result.code, result.stdout]).toEqual([2, ''])
  expect(result.stderr).toContain("invalid KEYWARD_AUTO_VERIFY_INSTALLATIONS 'ture'")
  expect(existsSync(data)).toBe(false)
})

test('a bad value from the environment is named as the variable set, one on the command line as the flag (which wins)', async () => {
  const data = `${tempDir('keyward-serve-options-')}/data`
  // Each with a free port and no limits of its own, should the refusal not happen.
  const anyPort = ['--port', '0']
  const noLimits = ['--rate-limit', '0']
  const cases: [string[], Record<string, string>, string][] = [
    [anyPort, { KEYWARD_RATE_LIMIT: 'x' }, "invalid KEYWARD_RATE_LIMIT 'x'"],
    [[...anyPort, '--rate-limit', 'y'], { KEYWARD_RATE_LIMIT: 'x' }, "invalid --rate-limit 'y'"],
    [noLimits, { KEYWARD_PORT: 'abc' }, "invalid KEYWARD_PORT 'abc': give a number from 0 to 65535"],
    [[...anyPort, ...noLimits], { KEYWARD_AUDIT_RETENTION: 'forever' }, "invalid KEYWARD_AUDIT_RETENTION 'forever'"],
    [[...anyPort, ...noLimits], { KEYWARD_DATABASE_TIMEOUT: 'soon' }, "invalid KEYWARD_DATABASE_TIMEOUT 'soon'"],
    [[...anyPort, ...noLimits], { KEYWARD_COMPACT_AFTER_BYTES: 'many' }, "invalid KEYWARD_COMPACT_AFTER_BYTES 'many'"],
    [[...anyPort, ...noLimits], { KEYWARD_DATABASE_CONNECTIONS: '0' }, "invalid KEYWARD_DATABASE_CONNECTIONS '0': give a number of connections from 1 to 1000"],
    [[...anyPort, ...noLimits, '--database-connections', '1001'], {}, "invalid --database-connections '1001'"],
    [[...anyPort, ...noLimits], { KEYWARD_STOP_TIMEOUT: 'never' }, "invalid KEYWARD_STOP_TIMEOUT 'never'"],
    [[...anyPort, ...noLimits, '--stop-timeout', '0s'], {}, "invalid --stop-timeout '0s'"],
    // Past the documented 24 h (a timer of 25 days would overflow and fire at once).
    [[...anyPort, ...noLimits, '--stop-timeout', '25h'], {}, "invalid --stop-timeout '25h'"],
    [[...anyPort, ...noLimits, '--stop-timeout', '25d'], {}, "invalid --stop-timeout '25d'"],
    [['--port', '65536', ...noLimits], {}, "invalid --port '65536'"],
    // Number() reads these as 16 and 47,750: digits only, as for every other number.
    [['--port', '0x10', ...noLimits], {}, "invalid --port '0x10'"],
    [['--port', '4.775e4', ...noLimits], {}, "invalid --port '4.775e4'"],
    [noLimits, { KEYWARD_PORT: '0b1' }, "invalid KEYWARD_PORT '0b1'"],
    [[...anyPort, ...noLimits], { KEYWARD_TLS_KEY: 'key.pem' }, 'KEYWARD_TLS_KEY without --tls-cert: give both, or neither'],
    [[...anyPort, ...noLimits, '--tls-cert', 'cert.pem'], {}, '--tls-cert without --tls-key: give both, or neither'],
  ]
  const results = await Promise.all(cases.map(([args, env]) => run(keywardCommand(['serve', '--data', data, ...args]), env)))
  results.forEach((result, i) => {
    expect({ case: cases[i]![2], code: result.code }).toEqual({ case: cases[i]![2], code: 2 })
    expect(result.stderr).toContain(`keyward: ${cases[i]![2]}`)
  })
  expect(existsSync(data)).toBe(false)
  // A flag that reads no variable is named as the flag, whatever the environment holds.
  const restore = await run(keywardCommand(['restore', '--from', `${data}.tar`]), { KEYWARD_DATA: data, KEYWARD_FROM: 'x' })
  expect([restore.code, restore.stderr.split('\n')[0]]).toEqual([2, 'keyward: --data is required'])
}, 30000)

test('a --public-url (or KEYWARD_PUBLIC_URL) that is no absolute http or https URL: usage, exit 2, nothing created', async () => {
  const refused = ['not a url', '/relative/path', 'keyward.example.com', 'ftp://keyward.example.com', 'https://', '', 'http:keyward.example', 'https:/keyward.example', ' https://keyward.example']
  const parent = tempDir('keyward-serve-options-')
  await Promise.all(
    refused.flatMap((url, i) => {
      const flag = `${parent}/flag-${i}`
      const env = `${parent}/env-${i}`
      return [
        [flag, '--public-url', run(keywardCommand(['serve', '--data', flag, '--port', '0', '--public-url', url]))] as const,
        // An empty variable is no setting at all, like every other KEYWARD_* variable.
        ...(url ? [[env, 'KEYWARD_PUBLIC_URL', run(keywardCommand(['serve', '--data', env, '--port', '0']), { KEYWARD_PUBLIC_URL: url })] as const] : []),
      ].map(async ([data, named, started]) => {
        const result = await started
        expect([url, result.code, result.stdout]).toEqual([url, 2, ''])
        expect(result.stderr).toContain(`invalid ${named} '${url}': give an absolute http or https URL`)
        expect(result.stderr).toContain('Usage: keyward serve')
        expect(existsSync(data)).toBe(false)
      })
    }),
  )
  rmSync(parent, { recursive: true })
}, 30000)

test('on a wildcard host without --public-url, serve warns that host_url names the wildcard; not with it', async () => {
  const data = `${tempDir('keyward-serve-options-')}/data`
  const warned = await startServer(data, { wrap: (command) => [...command, '--host', '0.0.0.0'] })
  expect(warned.url).toMatch(/^http:\/\/0\.0\.0\.0:\d+$/)
  const warnings = warned.stderr.text.split('\n').filter((line) => line.includes('"level":"warn"'))
  expect(warnings.map((line) => JSON.parse(line).msg)).toEqual([
    `0.0.0.0 is a wildcard address; new applications get host_url ${warned.url}, which no client can call: set --public-url`,
  ])
  expect(await stopServer(warned, 'SIGTERM')).toBe(0)

  const quiet = await startServer(data, { wrap: (command) => [...command, '--host', '0.0.0.0', '--public-url', 'https://keyward.example.com'] })
  // Its only warning is the first-start hint (nothing has been done in the dir yet), not the host's.
  const quietWarnings = quiet.stderr.text.split('\n').filter((line) => line.includes('"level":"warn"'))
  expect(quietWarnings.map((line) => JSON.parse(line).msg)).toEqual([expect.stringMatching(/^nothing has been done here since the first start/)])
  expect(await stopServer(quiet, 'SIGTERM')).toBe(0)
})
