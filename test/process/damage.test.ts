/**
 * Damage on disk (issue 4 item 2, CONTRACT section 7): a real data dir built by a real server (a
 * snapshot from a graceful stop, then a log from more writes and a SIGKILL), then each of its files
 * damaged in turn, in a copy of the dir:
 *
 *   (a) a torn tail, as a crash mid-append leaves it: start, with a warning, and nothing lost;
 *   (b) a flipped byte, (c) a truncation: refused (exit 1, a message naming the file and the
 *       offset) or started with every record exactly as acknowledged. Never silently changed.
 *
 * A damaged secret is refused as well: never a server that accepts other tokens than it issued.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from 'bun:test'
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generateKeyPairSync } from 'node:crypto'
import { tempDir } from '../support/harness.ts'
import { api, initLine, killServers, keywardCommand, run, startServer, stopServer, type ServerProcess } from '../support/server-process.ts'
import { encodeRecord, LOG_HEADER_BYTES, scanLog } from '../../src/store/log-format.ts'

setDefaultTimeout(30000)

const parent = tempDir('keyward-damage-')
const pristine = join(parent, 'pristine')
let token = ''
let vendorId = ''
/** Every record as the API showed it once all writes were acknowledged. */
let acknowledged: Dump
let copies = 0

afterAll(async () => {
  await killServers() // those a failed test left running
  rmSync(parent, { recursive: true, force: true })
})

type Dump = Record<string, unknown>

/** Everything the API shows, records keyed by id: organizations, environments, applications, ... */
async function dump(url: string): Promise<Dump> {
  const get = async (path: string) => {
    const res = await api(url, token, 'GET', path)
    if (res.status !== 200) throw new Error(`GET ${path}: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body
  }
  const out: Dump = {}
  for (const o of (await get('/api/organizations')).organizations) out[`organization ${o.organization_id}`] = o
  for (const a of (await get('/api/applications')).applications) {
    out[`application ${a.application_id}`] = a
    out[`application environments ${a.application_id}`] = (await api(url, token, 'GET', `/api/environments/${a.application_id}`)).body.environments
  }
  for (const o of (await get('/api/organizations')).organizations) {
    const res = await api(url, token, 'GET', `/api/organizations/${o.organization_id}/environments`)
    if (res.status === 200) out[`organization environments ${o.organization_id}`] = [res.body.default, res.body.supported]
  }
  for (const c of (await get('/api/consumers?page=1&page_size=1000')).consumers) out[`consumer ${c.consumer_id}`] = c
  for (const i of (await get('/api/installations?page=1&page_size=1000')).installations) out[`installation ${i.installation_id}`] = i
  for (const e of (await get('/api/enrollments?page=1&page_size=1000')).enrollments) {
    out[`enrollment ${e.enrollment_id}`] = e
    out[`keysets ${e.enrollment_id}`] = (await get(`/api/enrollments/${e.enrollment_id}/keysets`)).keysets
  }
  return out
}

async function expectOk(res: Promise<{ status: number; body: unknown }>, status = 201) {
  const answer = await res
  expect([answer.status, answer.body]).toEqual([status, expect.anything()])
  return answer.body as any // eslint-disable-line @typescript-eslint/no-explicit-any
}

const clientKey = () => generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'der' }).toString('base64')

/** Customers, applications, consumers, installations, enrollments and keysets, with changes to each. */
async function writeRecords(server: ServerProcess, round: number): Promise<void> {
  const call = (method: string, path: string, body?: unknown) => api(server.url, token, method, path, body)
  for (let n = 0; n < 3; n++) {
    const customer = (await expectOk(call('POST', '/api/organizations', {
      description: `customer ${round}.${n}`,
      parent_id: vendorId,
      supported_environments: { default: 'prod', supported: 'prod,test,dev' },
    }))).organization.organization_id
    await expectOk(call('POST', '/api/organizations', { description: `partner ${round}.${n}`, parent_id: customer }))
    await expectOk(call('PATCH', `/api/organizations/${customer}`, { description: `customer ${round}.${n} renamed` }), 200)
    const app = (await expectOk(call('POST', '/api/applications', { organization_id: customer, description: `app ${round}.${n}`, allowed_environments: 'prod,test' }))).application.application_id
    await expectOk(call('POST', `/api/environments/${app}`, { environment: 'dev' }), 200)
    await expectOk(call('PATCH', `/api/organizations/${customer}/environments`, { environment: 'qa' }), 200)
    const consumer = crypto.randomUUID()
    const installation = crypto.randomUUID()
    await expectOk(call('POST', '/api/consumers', { consumer_id: consumer, organization_id: customer }))
    await expectOk(call('POST', '/api/installations', { installation_id: installation, description: `phone ${round}.${n}`, organization_id: customer }))
    await expectOk(call('PATCH', `/api/installations/${installation}/verify`), 200)
    const enrollment = crypto.randomUUID()
    await expectOk(call('POST', '/api/enrollments', {
      enrollment_id: enrollment,
      consumer_id: consumer,
      installation_id: installation,
      application_id: app,
      environment: 'test',
      installation_description: 'ignored',
    }))
    await expectOk(call('POST', `/api/enrollments/${enrollment}/keysets`, { client_enclave_key: clientKey() }))
    await expectOk(call('POST', `/api/enrollments/${enrollment}/keysets`, { client_enclave_key: clientKey() }))
    await expectOk(call('PATCH', `/api/consumers/${consumer}/suspend`), 200)
  }
}

beforeAll(async () => {
  const first = await startServer(pristine)
  ;({ organization_id: vendorId, token } = initLine(first))
  await writeRecords(first, 1)
  expect(await stopServer(first, 'SIGTERM')).toBe(0) // a snapshot
  // A graceful stop whose snapshot cannot be written (a directory in the way of its temp file):
  // the log was rotated, and the segment before the rotation stays.
  const second = await startServer(pristine)
  await writeRecords(second, 2)
  mkdirSync(join(pristine, 'snapshot.json.tmp', 'in-the-way'), { recursive: true })
  expect(await stopServer(second, 'SIGTERM')).toBe(1)
  rmSync(join(pristine, 'snapshot.json.tmp'), { recursive: true })
  const third = await startServer(pristine)
  await writeRecords(third, 3) // the newest segment
  acknowledged = await dump(third.url)
  expect(await stopServer(third, 'SIGKILL')).toBe(-9)
})

/** A copy of the pristine data dir to damage. */
function copy(): string {
  const dir = join(parent, `copy-${++copies}`)
  cpSync(pristine, dir, { recursive: true })
  return dir
}

const wals = () => readdirSync(pristine).filter((n) => /^wal-\d{16}\.log$/.test(n)).sort()

/** Record start offsets in a log file, and where its records end. */
function records(path: string): { offsets: number[]; end: number } {
  const scan = scanLog(readFileSync(path), path)
  const offsets: number[] = []
  let at = 0
  for (const payload of scan.payloads) {
    offsets.push(at)
    at += LOG_HEADER_BYTES + payload.length
  }
  return { offsets, end: scan.validEnd }
}

async function startOrRefusal(dir: string): Promise<{ server: ServerProcess } | { refused: { code: number; stderr: string } }> {
  try {
    return { server: await startServer(dir) }
  } catch (error) {
    return { refused: { code: Number(/exited \((\d+)\)/.exec((error as Error).message)?.[1] ?? -1), stderr: (error as Error).message } }
  }
}

/**
 * Starts a server on the damaged dir. Either it refuses (exit 1, naming the file and an offset, and
 * nothing changed on disk), or it serves every record exactly as acknowledged.
 */
async function expectRefusedOrIntact(dir: string, file: string): Promise<'refused' | 'intact'> {
  const path = join(dir, file)
  const before = readFileSync(path)
  const outcome = await startOrRefusal(dir)
  if ('refused' in outcome) {
    expect(outcome.refused.code).toBe(1)
    expect(outcome.refused.stderr).toContain(path)
    expect(outcome.refused.stderr).toMatch(/offset \d+/)
    expect(readFileSync(path)).toEqual(before) // refused, not "repaired"
    return 'refused'
  }
  const { server } = outcome
  try {
    expect(await dump(server.url)).toEqual(acknowledged)
  } finally {
    await stopServer(server, 'SIGKILL')
  }
  return 'intact'
}

function flip(path: string, at: number): void {
  const bytes = readFileSync(path)
  bytes[at] = bytes[at]! ^ 0x5a // never turns a byte into the same or a zero byte of JSON/hex text
  writeFileSync(path, bytes)
}

/** A copy with one byte of `file` flipped. */
function flipped(file: string, at: number): string {
  const dir = copy()
  flip(join(dir, file), at)
  return dir
}

describe('the pristine dir', () => {
  test('has a snapshot, two log segments after it, and the secret; starts with everything', async () => {
    expect(readdirSync(pristine).sort()).toEqual(['secret', 'serve.lock', 'snapshot.json', ...wals()])
    expect(wals()).toHaveLength(2)
    for (const wal of wals()) expect(records(join(pristine, wal)).offsets.length).toBeGreaterThan(10)
    expect(await expectRefusedOrIntact(copy(), 'secret')).toBe('intact')
  })
})

describe('log segments', () => {
  test('newest segment, torn tail: a partial record after the last one is dropped with a warning', async () => {
    const segment = wals().at(-1)!
    const { end } = records(join(pristine, segment))
    const lsn = 1_000_000 // never acknowledged: no answer was ever given for it
    const record = encodeRecord(Buffer.from(JSON.stringify({ lsn, puts: [['consumers', { consumer_id: 'x' }]] })))
    for (const cut of [3, LOG_HEADER_BYTES, LOG_HEADER_BYTES + 10, record.length - 1]) {
      const dir = copy()
      const path = join(dir, segment)
      const bytes = readFileSync(path)
      bytes.set(record.subarray(0, cut), end) // where the crashed append was writing
      writeFileSync(path, bytes)
      const size = statSync(path).size
      const server = await startServer(dir)
      try {
        expect(server.stderr.text).toContain(`warning: ${path}: dropped an incomplete last record at offset ${end}`)
        expect(await dump(server.url)).toEqual(acknowledged)
        expect(statSync(path).size).toBe(size)
      } finally {
        await stopServer(server, 'SIGKILL')
      }
    }
  })

  test('older segment, torn tail: refused (a crash can only tear the newest)', async () => {
    const segment = wals()[0]!
    const { end } = records(join(pristine, segment))
    const dir = copy()
    const path = join(dir, segment)
    const bytes = readFileSync(path)
    bytes.set(encodeRecord(Buffer.from('{"lsn":1000000,"puts":[]}')).subarray(0, 20), end)
    writeFileSync(path, bytes)
    expect(await expectRefusedOrIntact(dir, segment)).toBe('refused')
  })

  for (const name of ['older', 'newest'] as const) {
    const segment = () => (name === 'older' ? wals()[0]! : wals().at(-1)!)

    test(`${name} segment, a flipped byte anywhere in its records: refused, naming the file and the record`, async () => {
      const { offsets, end } = records(join(pristine, segment()))
      const positions = [0, offsets[1]! + 2, Math.floor(end / 2), offsets.at(-1)! + 5, offsets.at(-1)! + LOG_HEADER_BYTES + 3, end - 1]
      for (const at of positions) expect(await expectRefusedOrIntact(flipped(segment(), at), segment())).toBe('refused')
    })

    test(`${name} segment, a flipped byte in the zeros after its records: refused, or read as a torn byte`, async () => {
      const { end } = records(join(pristine, segment()))
      const size = statSync(join(pristine, segment())).size
      // Right after the last record, one byte is what a crash one byte into an append leaves: a
      // torn tail, dropped with a warning in the newest segment, damage in an older one.
      expect(await expectRefusedOrIntact(flipped(segment(), end), segment())).toBe(name === 'newest' ? 'intact' : 'refused')
      for (const at of [end + LOG_HEADER_BYTES, Math.floor((end + size) / 2), size - 1]) {
        expect(await expectRefusedOrIntact(flipped(segment(), at), segment())).toBe('refused')
      }
    })

    test(`${name} segment, truncated in the middle, inside a record or between two: refused; in the zeros after them: intact`, async () => {
      const { offsets, end } = records(join(pristine, segment()))
      const size = statSync(join(pristine, segment())).size
      for (const cut of [0, Math.floor(end / 2), offsets[Math.floor(offsets.length / 2)]!, offsets.at(-1)!, end - 1, end]) {
        const dir = copy()
        truncateSync(join(dir, segment()), cut)
        expect(await expectRefusedOrIntact(dir, segment())).toBe('refused')
      }
      for (const cut of [end + 1, Math.floor((end + size) / 2)]) {
        const dir = copy()
        truncateSync(join(dir, segment()), cut)
        expect(await expectRefusedOrIntact(dir, segment())).toBe('intact')
      }
    })
  }
})

describe('snapshot', () => {
  const path = () => join(pristine, 'snapshot.json')

  test('torn tail (bytes appended, or the end cut off): refused', async () => {
    const size = statSync(path()).size
    const appended = copy()
    writeFileSync(join(appended, 'snapshot.json'), Buffer.concat([readFileSync(path()), Buffer.from('{"organization_id":')]))
    expect(await expectRefusedOrIntact(appended, 'snapshot.json')).toBe('refused')
    const cut = copy()
    truncateSync(join(cut, 'snapshot.json'), size - 5)
    expect(await expectRefusedOrIntact(cut, 'snapshot.json')).toBe('refused')
  })

  test('a flipped byte anywhere: refused', async () => {
    const size = statSync(path()).size
    for (const at of [0, 30, Math.floor(size / 2), size - 40, size - 2]) {
      expect(await expectRefusedOrIntact(flipped('snapshot.json', at), 'snapshot.json')).toBe('refused')
    }
  })

  test('truncated in the middle: refused', async () => {
    const dir = copy()
    truncateSync(join(dir, 'snapshot.json'), Math.floor(statSync(path()).size / 2))
    expect(await expectRefusedOrIntact(dir, 'snapshot.json')).toBe('refused')
  })
})

describe('secret', () => {
  test('a flipped byte anywhere: refused (never a server that takes other tokens than it issued)', async () => {
    const size = statSync(join(pristine, 'secret')).size
    for (const at of [0, 17, Math.floor(size / 2), 63, 64, size - 3]) {
      expect(await expectRefusedOrIntact(flipped('secret', at), 'secret')).toBe('refused')
    }
  })

  test('torn tail or truncation: refused, or started with the same secret (old tokens still valid)', async () => {
    const size = statSync(join(pristine, 'secret')).size
    const appended = copy()
    writeFileSync(join(appended, 'secret'), Buffer.concat([readFileSync(join(pristine, 'secret')), Buffer.from('0a1b')]))
    expect(await expectRefusedOrIntact(appended, 'secret')).toBe('refused')
    for (const cut of [0, 10, 32, 63, size - 2]) {
      const dir = copy()
      truncateSync(join(dir, 'secret'), cut)
      expect(await expectRefusedOrIntact(dir, 'secret')).toBe('refused')
    }
  })

  test('missing on an initialised dir: refused, not a server that cannot check tokens', async () => {
    const dir = copy()
    rmSync(join(dir, 'secret'))
    const result = await run(keywardCommand(['serve', '--data', dir, '--port', '0']))
    expect(result.code).toBe(1)
    expect(result.stderr).toContain(join(dir, 'secret'))
    expect(result.stderr).not.toContain('listening')
  })
})
