/**
 * A disk that refuses writes (docs/storage.md): the real server runs under a
 * file-size limit (`ulimit -f`, with SIGXFSZ ignored so a write past it fails with EFBIG instead of
 * killing the process). Writes go on until the log cannot grow: such a write is a 503 problem, leaves
 * no trace, reads go on, and a restart without the limit has exactly the acknowledged writes: every
 * 2xx present, every 503 absent. The snapshot a graceful stop writes may fail under the limit too;
 * nothing may be lost or damaged then either.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { readdirSync } from 'node:fs'
import { tempDataDir } from '../support/temp-dirs'
import { api, initLine, isDataDirLocked, waitFor, killServers, keywardCommand, run, startServer, stopServer, underFileSizeLimit, type ServerProcess } from '../support/server-process.ts'

setDefaultTimeout(30000)

afterAll(killServers) // those a failed test left running
const newDataDir = () => tempDataDir('keyward-disk-')

/** The limit: room for a few growth steps of the log, not for much more. */
const LIMIT_KIB = 512
// Makes each write about 2 KiB (the record, and its audit event holding the description again), so
// the log fills in a few hundred writes.
const LONG = 'x'.repeat(900)

interface Ledger {
  /** Organization id → its latest acknowledged description. */
  readonly organizations: Map<string, string>
  /** Consumers whose create was acknowledged. */
  readonly consumers: Set<string>
  /** Descriptions of organization creates answered 503. */
  readonly failedCreates: string[]
  /** Organization updates answered 503: [id, description]. */
  readonly failedUpdates: [string, string][]
  /** Consumer creates answered 503. */
  readonly failedConsumers: string[]
}

const newLedger = (): Ledger => ({ organizations: new Map(), consumers: new Set(), failedCreates: [], failedUpdates: [], failedConsumers: [] })

function expectStorageProblem(res: { status: number; body: any; contentType: string }) {
  expect(res.status).toBe(503)
  expect(res.contentType).toContain('application/problem+json')
  expect(res.body).toMatchObject({ type: 'about:blank', title: 'Service Unavailable', status: 503, code: 'storage_unavailable' })
  expect(typeof res.body.trace_id).toBe('string')
}

/**
 * Eight clients create organizations, update their own, create consumers, until each has had a
 * write refused (or, with `untilRefused` false, for `writes` writes each). Every answer is recorded.
 */
let serial = 0 // descriptions are unique across the whole file

async function write(server: ServerProcess, token: string, customer: string, ledger: Ledger, options: { untilRefused: boolean; writes?: number }) {
  const client = async (n: number) => {
    const own: string[] = []
    for (let i = 0; options.untilRefused || i < options.writes!; i++) {
      const kind = own.length === 0 ? 0 : i % 3
      if (kind === 0) {
        const description = `org ${n}.${++serial} ${LONG}`
        const res = await api(server.url, token, 'POST', '/api/organizations', { description, parent_id: customer })
        if (res.status === 503) {
          expectStorageProblem(res)
          ledger.failedCreates.push(description)
          return
        }
        expect([res.status, res.body]).toEqual([201, expect.anything()])
        own.push(res.body.organization.organization_id)
        ledger.organizations.set(res.body.organization.organization_id, description)
      } else if (kind === 1) {
        const id = own[i % own.length]!
        const description = `update ${n}.${++serial} ${LONG}`
        const res = await api(server.url, token, 'PATCH', `/api/organizations/${id}`, { description })
        if (res.status === 503) {
          expectStorageProblem(res)
          ledger.failedUpdates.push([id, description])
          return
        }
        expect(res.status).toBe(200)
        ledger.organizations.set(id, description)
      } else {
        const id = crypto.randomUUID()
        const res = await api(server.url, token, 'POST', '/api/consumers', { consumer_id: id, organization_id: customer })
        if (res.status === 503) {
          expectStorageProblem(res)
          ledger.failedConsumers.push(id)
          return
        }
        expect(res.status).toBe(201)
        ledger.consumers.add(id)
      }
    }
  }
  await Promise.all(Array.from({ length: 8 }, (_, n) => client(n)))
}

/** The server shows exactly what the ledger says was acknowledged, and nothing answered 503. */
async function expectExactly(server: ServerProcess, token: string, ledger: Ledger, known: string[]) {
  const listed = (await api(server.url, token, 'GET', '/api/organizations')).body.organizations as { organization_id: string; description: string }[]
  const shown = new Map(listed.map((o) => [o.organization_id, o.description]))
  const expected = new Map([...known.map((id) => [id, shown.get(id)!] as const), ...ledger.organizations])
  expect(shown).toEqual(expected) // every acknowledged create and update, and no other organization
  const descriptions = new Set(shown.values())
  for (const description of ledger.failedCreates) expect(descriptions.has(description)).toBe(false)
  for (const [id, description] of ledger.failedUpdates) expect(shown.get(id)).not.toBe(description)
  for (const id of ledger.consumers) expect((await api(server.url, token, 'GET', `/api/consumers/${id}`)).status).toBe(200)
  for (const id of ledger.failedConsumers) expect((await api(server.url, token, 'GET', `/api/consumers/${id}`)).status).toBe(404)
}

/** Reads are still answered, and show nothing of the refused writes. */
async function expectReadsWork(server: ServerProcess, token: string, ledger: Ledger, known: string[]) {
  expect((await fetch(`${server.url}/healthz`)).status).toBe(200)
  await expectExactly(server, token, ledger, known)
  const [id, description] = [...ledger.organizations][0]!
  const one = await api(server.url, token, 'GET', `/api/organizations/${id}`)
  expect([one.status, one.body.organization.description]).toEqual([200, description])
}

async function customerOf(server: ServerProcess, token: string, vendorId: string): Promise<string> {
  const res = await api(server.url, token, 'POST', '/api/organizations', { description: 'Customer', parent_id: vendorId })
  expect(res.status).toBe(201)
  return res.body.organization.organization_id
}

describe('the log cannot grow (file-size limit)', () => {
  test('503 problem, no trace, reads go on; kill -9, restart without the limit: exactly what was acknowledged', async () => {
    const data = newDataDir()
    const server = await startServer(data, { wrap: (command) => underFileSizeLimit(LIMIT_KIB, command) })
    const { organization_id: vendorId, token } = initLine(server)
    const customer = await customerOf(server, token, vendorId)
    const ledger = newLedger()
    await write(server, token, customer, ledger, { untilRefused: true })
    const refused = ledger.failedCreates.length + ledger.failedUpdates.length + ledger.failedConsumers.length
    expect(refused).toBe(8) // each client stopped at its first refusal (a write answered 503)
    expect(ledger.organizations.size).toBeGreaterThan(50)
    // The log is written in batches, a moment later (docs/operations.md "Logs").
    await waitFor('the failure in the log', () => server.stderr.text.includes('write-ahead log append failed'), server.proc)
    // Not ready while changes cannot be made durable (docs/operations.md); still alive.
    const readiness = await fetch(`${server.url}/readyz`)
    expect(readiness.status).toBe(503)
    expect(((await readiness.json()) as { code: string }).code).toBe('storage_unavailable')
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200)

    // Writes that still fit in the room left are taken; the next that does not is refused again.
    await write(server, token, customer, ledger, { untilRefused: true })
    await expectReadsWork(server, token, ledger, [vendorId, customer])
    // A token command handed to the server: refused with its own write's cause (it was the undo
    // that this write made, reported instead); a token it issued before the room ran out is kept.
    const issued: string[] = []
    let refusal: Awaited<ReturnType<typeof run>> | undefined
    while (refusal === undefined && issued.length < 20) {
      const result = await run(keywardCommand(['issue-token', '--data', data, '--org', vendorId, '--role', 'viewer']))
      if (result.code === 0) issued.push(result.stdout.trim())
      else refusal = result
    }
    expect([refusal?.code, refusal?.stderr]).toEqual([1, expect.stringContaining('EFBIG')])

    expect(await stopServer(server, 'SIGKILL')).toBe(-9)
    const restarted = await startServer(data)
    try {
      expect((await fetch(`${restarted.url}/readyz`)).status).toBe(200)
      await expectExactly(restarted, token, ledger, [vendorId, customer])
      for (const viewer of issued) expect((await api(restarted.url, viewer, 'GET', `/api/organizations/${vendorId}`)).status).toBe(200)
      // The disk has room again: writes are taken and kept.
      const more = newLedger()
      await write(restarted, token, customer, more, { untilRefused: false, writes: 5 })
      for (const [id, description] of more.organizations) ledger.organizations.set(id, description)
      for (const id of more.consumers) ledger.consumers.add(id)
      await expectExactly(restarted, token, ledger, [vendorId, customer])
    } finally {
      expect(await stopServer(restarted, 'SIGTERM')).toBe(0)
    }
    const last = await startServer(data)
    try {
      await expectExactly(last, token, ledger, [vendorId, customer])
    } finally {
      await stopServer(last, 'SIGTERM')
    }
  })

  test('a graceful stop whose snapshot cannot be written either: exit 1, nothing lost or damaged', async () => {
    const data = newDataDir()
    // First, without a limit, more data than the limit allows: the next snapshot cannot fit under it.
    const unlimited = await startServer(data)
    const { organization_id: vendorId, token } = initLine(unlimited)
    const customer = await customerOf(unlimited, token, vendorId)
    const ledger = newLedger()
    await write(unlimited, token, customer, ledger, { untilRefused: false, writes: 40 })
    expect(await stopServer(unlimited, 'SIGTERM')).toBe(0)

    const limited = await startServer(data, { wrap: (command) => underFileSizeLimit(LIMIT_KIB, command) })
    await write(limited, token, customer, ledger, { untilRefused: true })
    await expectReadsWork(limited, token, ledger, [vendorId, customer])
    const code = await stopServer(limited, 'SIGTERM')
    expect(code).toBe(1)
    expect(limited.stderr.text).toMatch(/"level":"error","msg":"failed","error":".*(EFBIG|too large)/i)
    expect(isDataDirLocked(data)).toBe(false)
    expect(readdirSync(data)).not.toContain('snapshot.json.tmp')

    const restarted = await startServer(data)
    try {
      await expectExactly(restarted, token, ledger, [vendorId, customer])
    } finally {
      expect(await stopServer(restarted, 'SIGTERM')).toBe(0) // and now the snapshot is written
    }
    const last = await startServer(data)
    try {
      await expectExactly(last, token, ledger, [vendorId, customer])
    } finally {
      await stopServer(last, 'SIGTERM')
    }
  })
})

describe('first start', () => {
  test('a first start with no room on the disk prints no token; the dir still initialises later', async () => {
    const data = newDataDir()
    const failed = await run(underFileSizeLimit(0, keywardCommand(['serve', '--data', data, '--port', '0'])))
    expect(failed.code).toBe(1)
    expect(failed.stderr).toMatch(/EFBIG|too large/i)
    expect(failed.stdout).toBe('') // no token was shown for a vendor that was never recorded

    const server = await startServer(data)
    try {
      const { token } = initLine(server)
      expect((await api(server.url, token, 'GET', '/api/organizations')).status).toBe(200)
    } finally {
      await stopServer(server, 'SIGTERM')
    }
    const again = await run(keywardCommand(['issue-token', '--data', data, '--org', initLine(server).organization_id, '--role', 'viewer']))
    expect(again.code).toBe(0)
  })
})

describe('token commands on a dir without a server', () => {
  test('whose snapshot on closing cannot be written: the change is made and reported made (exit 0, the token shown, a warning); tokens list writes nothing and works', async () => {
    const data = newDataDir()
    // More data than the limit allows, so that the snapshot a command writes on closing cannot fit.
    const unlimited = await startServer(data)
    const { organization_id: vendorId, token } = initLine(unlimited)
    await write(unlimited, token, await customerOf(unlimited, token, vendorId), newLedger(), { untilRefused: false, writes: 40 })
    expect(await stopServer(unlimited, 'SIGTERM')).toBe(0)

    const limited = (args: string[]) => run(underFileSizeLimit(LIMIT_KIB, keywardCommand([...args, '--data', data])))
    const issued = await limited(['issue-token', '--org', vendorId, '--role', 'viewer', '--description', 'under the limit'])
    expect([issued.code, issued.stdout]).toEqual([0, expect.stringMatching(/^kw2_[0-9a-f]{32}_[A-Za-z0-9_-]{43}\n$/)])
    expect(issued.stderr).toMatch(/^keyward: warning: the change is made and durable, but the snapshot .*(EFBIG|too large)/i)
    const listed = await limited(['tokens', 'list'])
    expect(listed.code).toBe(0)
    const record = listed.stdout.split('\n').filter(Boolean).map((line) => JSON.parse(line)).find((each) => each.description === 'under the limit')
    expect(record).toMatchObject({ state: 'active', organization_id: vendorId, role: 'viewer' })
    const revoked = await limited(['tokens', 'revoke', record.token_id])
    expect(revoked.code).toBe(0)
    expect(revoked.stderr).toMatch(/^keyward: warning: the change is made and durable/)

    const restarted = await startServer(data)
    try {
      expect((await api(restarted.url, issued.stdout.trim(), 'GET', '/api/organizations')).status).toBe(401)
      const events = (await api(restarted.url, token, 'GET', `/api/audit-events?target_ids=${record.token_id}`)).body.audit_events
      expect(events.map((event: { action: string }) => event.action).sort()).toEqual(['token.create', 'token.revoke'])
    } finally {
      expect(await stopServer(restarted, 'SIGTERM')).toBe(0)
    }
  })
})
