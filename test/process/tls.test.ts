/**
 * `serve --tls-cert FILE --tls-key FILE` (README "Configuration"): HTTPS only, checked with a real
 * TLS client (curl) that trusts a test CA made here with openssl (in a temp dir, never committed).
 * host_url defaults to https then. Both flags or neither; files that cannot be used stop the start.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tempDataDir, tempDir } from '../support/temp-dirs'
import { initLine, keywardCommand, killServers, run, startServer, stopServer, type ServeOptions } from '../support/server-process.ts'

setDefaultTimeout(15000)

const dir = tempDir('keyward-tls-')
const ca = join(dir, 'ca.pem')
const cert = join(dir, 'server.pem')
const key = join(dir, 'server.key')
const otherKey = join(dir, 'other.key')

async function openssl(...args: string[]): Promise<void> {
  const result = await run(['openssl', ...args])
  if (result.code !== 0) throw new Error(`openssl ${args.join(' ')}: ${result.stderr}`)
}

/** A test CA, and a certificate it signs for 127.0.0.1 (a subjectAltName, as clients require). */
beforeAll(async () => {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes']
  await openssl('req', '-x509', ...ec, '-keyout', join(dir, 'ca.key'), '-out', ca, '-days', '1', '-subj', '/CN=keyward test CA')
  await openssl('req', ...ec, '-keyout', key, '-out', join(dir, 'server.csr'), '-subj', '/CN=127.0.0.1')
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n')
  await openssl('x509', '-req', '-in', join(dir, 'server.csr'), '-CA', ca, '-CAkey', join(dir, 'ca.key'), '-CAcreateserial', '-days', '1', '-extfile', join(dir, 'san.ext'), '-out', cert)
  await openssl('genpkey', '-algorithm', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', otherKey)
})

afterAll(killServers)

const newDataDir = () => tempDataDir('keyward-tls-')

/** curl trusting only the test CA; the status code on the last line of stdout. */
async function curl(url: string, ...args: string[]): Promise<{ code: number; status: number; body: string }> {
  const result = await run(['curl', '--silent', '--show-error', '--max-time', '10', '--cacert', ca, '--write-out', '\n%{http_code}', ...args, url])
  const lines = result.stdout.split('\n')
  return { code: result.code, status: Number(lines.pop()), body: lines.join('\n') }
}

async function expectServesHttpsOnly(options: ServeOptions): Promise<void> {
  const server = await startServer(newDataDir(), options)
  try {
    expect(server.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/)
    const { organization_id: vendorId, token } = initLine(server)
    const health = await curl(`${server.url}/healthz`)
    expect([health.code, health.status, JSON.parse(health.body)]).toEqual([0, 200, { status: 'ok' }])
    const orgs = await curl(`${server.url}/api/organizations`, '--header', `Authorization: Bearer ${token}`)
    expect([orgs.code, orgs.status]).toEqual([0, 200])
    expect(JSON.parse(orgs.body).organizations.map((o: { organization_id: string }) => o.organization_id)).toEqual([vendorId])

    // host_url names the https address.
    const post = (path: string, body: unknown) =>
      curl(`${server.url}${path}`, '--header', `Authorization: Bearer ${token}`, '--header', 'Content-Type: application/json', '--data', JSON.stringify(body))
    const customer = JSON.parse((await post('/api/organizations', { description: 'Acme', parent_id: vendorId })).body).organization.organization_id
    const application = await post('/api/applications', { organization_id: customer, description: 'App' })
    expect(application.status).toBe(201)
    expect(JSON.parse(application.body).application.host_url).toBe(server.url)

    // TLS 1.2 offers forward-secret AEAD suites only (src/cli/listen.ts): a CBC suite with SHA-1 and
    // the old protocol versions find no handshake; TLS 1.3 is offered.
    const tls12 = (cipher: string) => curl(`${server.url}/healthz`, '--tlsv1.2', '--tls-max', '1.2', '--ciphers', cipher)
    expect((await tls12('ECDHE-ECDSA-AES128-GCM-SHA256')).status).toBe(200)
    expect((await tls12('ECDHE-ECDSA-AES128-SHA')).code).not.toBe(0)
    expect((await curl(`${server.url}/healthz`, '--tlsv1.1', '--tls-max', '1.1')).code).not.toBe(0)
    expect((await curl(`${server.url}/healthz`, '--tlsv1.3')).status).toBe(200)

    // Plain HTTP on the same port gets no answer.
    const plain = await curl(server.url.replace('https:', 'http:') + '/healthz')
    expect(plain.code).not.toBe(0)
    expect(plain.status).not.toBe(200)
  } finally {
    expect(await stopServer(server, 'SIGTERM')).toBe(0)
  }
}

describe('serve with TLS', () => {
  test('--tls-cert and --tls-key: HTTPS only, host_url https', async () => {
    await expectServesHttpsOnly({ wrap: (command) => [...command, '--tls-cert', cert, '--tls-key', key] })
  })

  test('KEYWARD_TLS_CERT and KEYWARD_TLS_KEY', async () => {
    await expectServesHttpsOnly({ env: { KEYWARD_TLS_CERT: cert, KEYWARD_TLS_KEY: key } })
  })
})

describe('TLS files that cannot be used: the start stops before anything else', () => {
  const serve = (data: string, ...args: string[]) => run(keywardCommand(['serve', '--data', data, '--port', '0', ...args]))

  test('one flag without the other: usage, exit 2, before any log line (bad usage is not logged: docs/operations.md)', async () => {
    await Promise.all(
      [['--tls-cert', cert], ['--tls-key', key]].map(async (args) => {
        const data = newDataDir()
        const result = await serve(data, ...args)
        expect([args[0], result.code, result.stdout]).toEqual([args[0], 2, ''])
        const other = args[0] === '--tls-cert' ? '--tls-key' : '--tls-cert'
        expect(result.stderr).toStartWith(`keyward: ${args[0]} without ${other}: give both, or neither`)
        expect(result.stderr).toContain('Usage: keyward serve')
        expect(existsSync(data)).toBe(false)
      }),
    )
  })

  const refusals: [string, () => string[], string][] = [
    ['a certificate file that cannot be read', () => ['--tls-cert', join(dir, 'missing.pem'), '--tls-key', key], `cannot read --tls-cert ${join(dir, 'missing.pem')}`],
    ['a key file that cannot be read', () => ['--tls-cert', cert, '--tls-key', dir], `cannot read --tls-key ${dir}`],
    ['a certificate file that is no certificate', () => ['--tls-cert', key, '--tls-key', key], `--tls-cert ${key} holds no PEM certificate`],
    ['a key file that is no key', () => ['--tls-cert', cert, '--tls-key', cert], `--tls-key ${cert} holds no PEM private key`],
    ['a key of another certificate', () => ['--tls-cert', cert, '--tls-key', otherKey], `--tls-key ${otherKey} is not the key of the certificate in --tls-cert ${cert}`],
  ]
  test('files that cannot be read, are not PEM or are no pair: exit 1 with a message naming the file, nothing created', async () => {
    await Promise.all(
      refusals.map(async ([name, args, message]) => {
        const data = newDataDir()
        const result = await serve(data, ...args())
        expect([name, result.code, result.stdout]).toEqual([name, 1, ''])
        expect(JSON.parse(result.stderr.trim().split('\n').at(-1)!)).toMatchObject({ level: 'error', msg: 'failed', error: expect.stringContaining(message) })
        expect(existsSync(data)).toBe(false)
      }),
    )
  })
})
