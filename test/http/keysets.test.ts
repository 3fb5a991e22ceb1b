/**
 * Keysets over HTTP (docs/api.md "Endpoints"): POST and GET /api/enrollments/{id}/keysets. Key formats
 * (base64, base64url, PEM of a P-256 SPKI key; anything else 400), retiring the previous keyset,
 * the list shape, suspended enrollments (409) and applications (401). Who may do each (every role
 * and scope of docs/api.md "Authentication, roles and scope"): authorization-matrix.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { generateKeyPairSync } from 'node:crypto'
import { createHarness, type Harness } from '../support/harness'
import { MAX_KEYSETS_PER_ENROLLMENT } from '../../src/modules/shared/limits'
import { createApplicationId, enroll, readAsVendor, tenants, TIMESTAMP, UUID_LOWER, ENROLLMENT_KEYS, p256Key, expectProblem } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// helpers

const KEYSET_KEYS = ['created', 'enrollment_id', 'environment', 'keyset_id', 'state']

/** A enabled for DEV and PROD with application appA (both); B not enabled, with appB. */
async function world() {
  const w = await tenants(h, { A: { default: 'PROD', supported: 'DEV,PROD' } })
  return { ...w, appA: await createApplicationId(h, w.A, 'dev,prod'), appB: await createApplicationId(h, w.B) }
}
type World = Awaited<ReturnType<typeof world>>

async function keysetsOf(id: string) {
  const res = await h.request('GET', `/api/enrollments/${id}/keysets`)
  expect(res.status).toBe(200)
  return res.body.keysets as Record<string, string>[]
}

const path = (id: string) => `/api/enrollments/${id}/keysets`

/** `count` retired keysets of the enrollment, made directly (thousands of requests would only be slower). */
async function addRetiredKeysets(enrollmentId: string, count: number) {
  const enrollment = await readAsVendor(h, 'enrollments', enrollmentId)
  await h.storage.transaction(async (tx) => {
    for (let n = 0; n < count; n++) {
      await tx.insert('keysets', {
        keyset_id: crypto.randomUUID(),
        enrollment_id: enrollmentId,
        application_id: enrollment.application_id!,
        environment: enrollment.environment!,
        client_enclave_key: p256Key().base64,
        state: 'retired',
      })
    }
  })
}
const postKey = (id: string, key: unknown, token?: string) => h.request('POST', path(id), { token, body: { client_enclave_key: key } })

// ---------------------------------------------------------------------------------------------

describe('POST /api/enrollments/{id}/keysets', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('201 with the enrollment, now carrying active_keyset_id and the key as standard base64 DER', async () => {
    const e = await enroll(h, w.appA, 'DEV')
    const key = p256Key()
    const res = await postKey(e.enrollment_id!, key.base64)
    expect(res.status).toBe(201)
    expect(Object.keys(res.body).sort()).toEqual(['enrollment', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const after = res.body.enrollment
    expect(Object.keys(after).sort()).toEqual(ENROLLMENT_KEYS)
    expect(after.active_keyset_id).toMatch(UUID_LOWER)
    expect({ ...after, active_keyset_id: null, modified: null }).toEqual({ ...e, client_enclave_key: key.base64, modified: null })
    expect(after.client_storage_key_shares).toBeNull()
    expect(after.modified > e.modified!).toBe(true)
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(after)
  })

  test('base64url and PEM are accepted and answered as standard base64 DER', async () => {
    for (const form of ['base64url', 'pem'] as const) {
      const e = await enroll(h, w.appA, 'PROD')
      const key = p256Key()
      expect(key[form]).not.toBe(key.base64)
      const res = await postKey(e.enrollment_id!, key[form])
      expect({ form, status: res.status }).toEqual({ form, status: 201 })
      expect(res.body.enrollment.client_enclave_key).toBe(key.base64)
    }
    // PEM with CRLF line ends and surrounding blanks.
    const e = await enroll(h, w.appA, 'PROD')
    const key = p256Key()
    const res = await postKey(e.enrollment_id!, `\n ${key.pem.replace(/\n/g, '\r\n')}  `)
    expect(res.status).toBe(201)
    expect(res.body.enrollment.client_enclave_key).toBe(key.base64)
  })

  test('anything but a P-256 public key is 400, and the enrollment is unchanged', async () => {
    const e = await enroll(h, w.appA, 'DEV')
    const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' }).publicKey
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey
    const ed = generateKeyPairSync('ed25519').publicKey
    const good = p256Key()
    const tampered = Buffer.from(good.der)
    tampered[tampered.length - 1]! ^= 0x01 // no longer a point on the curve
    const privatePem = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string
    const bad: unknown[] = [
      (p384.export({ type: 'spki', format: 'der' }) as Buffer).toString('base64'),
      p384.export({ type: 'spki', format: 'pem' }),
      (rsa.export({ type: 'spki', format: 'der' }) as Buffer).toString('base64'),
      rsa.export({ type: 'spki', format: 'pem' }),
      (ed.export({ type: 'spki', format: 'der' }) as Buffer).toString('base64'),
      tampered.toString('base64'),
      good.der.subarray(0, good.der.length - 8).toString('base64'),
      good.der.subarray(good.der.length - 65).toString('base64'), // the bare point, no SPKI
      privatePem,
      'garbage',
      'not base64 at all!',
      'AAAA',
      '',
      '   ',
      42,
      null,
      [good.base64],
    ]
    for (const key of bad) {
      const res = await postKey(e.enrollment_id!, key)
      expect({ key, status: res.status }).toEqual({ key, status: 400 })
      expectProblem(res, 400)
    }
    expectProblem(await h.request('POST', path(e.enrollment_id!), { body: {} }), 400)
    expectProblem(await h.request('POST', path(e.enrollment_id!)), 400)
    expectProblem(await h.request('POST', path(e.enrollment_id!), { body: '{"client_enclave_key":' }), 400)
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(e)
    expect(await keysetsOf(e.enrollment_id!)).toEqual([])
  })

  test('a suspended enrollment: 409; active again: 201', async () => {
    const e = await enroll(h, w.appA, 'DEV')
    const suspended = await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/suspend`)
    expect(suspended.status).toBe(200)
    expectProblem(await postKey(e.enrollment_id!, p256Key().base64), 409)
    expectProblem(await postKey(e.enrollment_id!, p256Key().base64, h.token(w.AP)), 409)
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(suspended.body.enrollment)
    expect(await keysetsOf(e.enrollment_id!)).toEqual([])
    expect((await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/activate`)).status).toBe(200)
    expect((await postKey(e.enrollment_id!, p256Key().base64)).status).toBe(201)
  })

  test('an enrollment whose environment was since removed from the application: 400, and it stays removable', async () => {
    const app = await createApplicationId(h, w.A, 'dev,prod')
    const e = await enroll(h, app, 'DEV')
    // Without keysets, DEV can be removed although an enrollment is in it.
    expect((await h.request('DELETE', `/api/environments/${app}`, { body: { environment: 'DEV' } })).status).toBe(200)
    expectProblem(await postKey(e.enrollment_id!, p256Key().base64), 400)
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(e)
    expect(await keysetsOf(e.enrollment_id!)).toEqual([])
    // Added back, keys can be made there again, and then it is held.
    expect((await h.request('POST', `/api/environments/${app}`, { body: { environment: 'DEV' } })).status).toBe(200)
    expect((await postKey(e.enrollment_id!, p256Key().base64)).status).toBe(201)
    expectProblem(await h.request('DELETE', `/api/environments/${app}`, { body: { environment: 'DEV' } }), 409)
  })

  test('a suspended application: 401 for keyset requests in scope, 404 out of it; nothing changes', async () => {
    const app = await createApplicationId(h, w.A, 'prod')
    const e = await enroll(h, app, 'PROD')
    expect((await postKey(e.enrollment_id!, p256Key().base64)).status).toBe(201)
    const before = await readAsVendor(h, 'enrollments', e.enrollment_id!)
    const keysets = await keysetsOf(e.enrollment_id!)
    expect((await h.request('PATCH', `/api/applications/${app}/suspend`)).status).toBe(200)
    for (const token of [h.vendorToken, h.token(w.A), h.token(w.AP), h.token(w.A, 'viewer')]) {
      expectProblem(await postKey(e.enrollment_id!, p256Key().base64, token), 401)
      expectProblem(await h.request('GET', path(e.enrollment_id!), { token }), 401)
    }
    expectProblem(await postKey(e.enrollment_id!, p256Key().base64, h.token(w.B)), 404)
    expectProblem(await h.request('GET', path(e.enrollment_id!), { token: h.token(w.B) }), 404)
    expect((await h.request('PATCH', `/api/applications/${app}/activate`)).status).toBe(200)
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(before)
    expect(await keysetsOf(e.enrollment_id!)).toEqual(keysets)
  })

  test('malformed id 400; unknown 404; wrong content type 415; over 64 KiB 413; no token 401', async () => {
    const key = p256Key().base64
    expectProblem(await postKey('enr-1', key), 400)
    expectProblem(await postKey(crypto.randomUUID(), key), 404)
    const e = await enroll(h, w.appA, 'DEV')
    expectProblem(await h.request('POST', path(e.enrollment_id!), { body: JSON.stringify({ client_enclave_key: key }), headers: { 'content-type': 'text/plain' } }), 415)
    expectProblem(await postKey(e.enrollment_id!, 'A'.repeat(65 * 1024)), 413)
    expectProblem(await postKey(e.enrollment_id!, key, null as unknown as string), 401)
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(e)
  })
})

describe('GET /api/enrollments/{id}/keysets', () => {
  let w: World
  beforeAll(async () => (w = await world()))

  test('exact shape; empty until the first keyset', async () => {
    const e = await enroll(h, w.appA, 'DEV')
    const empty = await h.request('GET', path(e.enrollment_id!.toUpperCase()))
    expect(empty.status).toBe(200)
    expect(Object.keys(empty.body).sort()).toEqual(['keysets', 'trace_id'])
    expect(empty.body.trace_id).toBe(empty.headers.get('x-trace-id'))
    expect(empty.body.keysets).toEqual([])
    const created = await postKey(e.enrollment_id!, p256Key().base64)
    const res = await h.request('GET', path(e.enrollment_id!))
    expect(res.body.keysets).toHaveLength(1)
    const [keyset] = res.body.keysets
    expect(Object.keys(keyset).sort()).toEqual(KEYSET_KEYS)
    expect(keyset).toEqual({
      keyset_id: created.body.enrollment.active_keyset_id,
      enrollment_id: e.enrollment_id,
      environment: 'DEV',
      state: 'active',
      created: created.body.enrollment.modified,
    })
    expect(keyset.created).toMatch(TIMESTAMP)
  })

  test('a new keyset retires the previous one; creation order; the enrollment follows the newest', async () => {
    const e = await enroll(h, w.appA, 'PROD')
    const ids: string[] = []
    const keys: string[] = []
    for (let i = 0; i < 3; i++) {
      const key = p256Key().base64
      const res = await postKey(e.enrollment_id!, key)
      expect(res.status).toBe(201)
      expect(ids).not.toContain(res.body.enrollment.active_keyset_id)
      ids.push(res.body.enrollment.active_keyset_id)
      keys.push(key)
      const listed = await keysetsOf(e.enrollment_id!)
      expect(listed.map((k) => k.keyset_id)).toEqual(ids)
      expect(listed.map((k) => k.state)).toEqual(ids.map((_, n) => (n === ids.length - 1 ? 'active' : 'retired')))
      expect(listed.every((k) => k.enrollment_id === e.enrollment_id && k.environment === 'PROD')).toBe(true)
      expect([...listed.map((k) => k.created)].sort()).toEqual(listed.map((k) => k.created))
    }
    const after = await readAsVendor(h, 'enrollments', e.enrollment_id!)
    expect(after.active_keyset_id).toBe(ids[2]!)
    expect(after.client_enclave_key).toBe(keys[2]!)
    // Keysets of one enrollment are not another's.
    const other = await enroll(h, w.appA, 'PROD')
    expect(await keysetsOf(other.enrollment_id!)).toEqual([])
  })

  test('whole without paging parameters (the active keyset, the newest, included); a page with `page`; at most `page_size` unpaged', async () => {
    const e = await enroll(h, w.appA, 'DEV')
    await addRetiredKeysets(e.enrollment_id!, 150)
    const created = await postKey(e.enrollment_id!, p256Key().base64)
    expect(created.status).toBe(201)
    const whole = await h.request('GET', path(e.enrollment_id!))
    expect(Object.keys(whole.body).sort()).toEqual(['keysets', 'trace_id'])
    expect(whole.body.keysets).toHaveLength(151)
    expect(whole.body.keysets.at(-1)).toMatchObject({ keyset_id: created.body.enrollment.active_keyset_id, state: 'active' })
    const newestFirst = await h.request('GET', `${path(e.enrollment_id!)}?order=desc`)
    expect(newestFirst.body.keysets).toEqual([...whole.body.keysets].reverse())
    // As the installation list: `page_size` alone bounds the unpaged shape; `page` makes a page.
    const sized = await h.request('GET', `${path(e.enrollment_id!)}?page_size=120`)
    expect(Object.keys(sized.body).sort()).toEqual(['keysets', 'trace_id'])
    expect(sized.body.keysets).toEqual(whole.body.keysets.slice(0, 120))
    const second = await h.request('GET', `${path(e.enrollment_id!)}?page=2`)
    expect(Object.keys(second.body).sort()).toEqual(['keysets', 'page', 'page_size', 'total', 'trace_id'])
    expect(second.body).toMatchObject({ total: 151, page: 2, page_size: 100 })
    expect(second.body.keysets).toEqual(whole.body.keysets.slice(100))
    const last = await h.request('GET', `${path(e.enrollment_id!)}?page=3&page_size=50&order=desc`)
    expect(last.body).toMatchObject({ total: 151, page: 3, page_size: 50 })
    expect(last.body.keysets).toEqual([...whole.body.keysets].reverse().slice(100, 150))
    expectProblem(await h.request('GET', `${path(e.enrollment_id!)}?page_size=1001`), 400)
  })

  test(`at most ${MAX_KEYSETS_PER_ENROLLMENT} an enrollment: one more is 409 too_many_keysets and changes nothing`, async () => {
    const e = await enroll(h, w.appA, 'DEV')
    await addRetiredKeysets(e.enrollment_id!, MAX_KEYSETS_PER_ENROLLMENT - 1)
    expect((await postKey(e.enrollment_id!, p256Key().base64)).status).toBe(201)
    const before = await readAsVendor(h, 'enrollments', e.enrollment_id!)
    expectProblem(await postKey(e.enrollment_id!, p256Key().base64), 409, 'too_many_keysets')
    expect(await readAsVendor(h, 'enrollments', e.enrollment_id!)).toEqual(before)
    expect(await keysetsOf(e.enrollment_id!)).toHaveLength(MAX_KEYSETS_PER_ENROLLMENT)
    // Another enrollment is not bounded by this one's keysets.
    expect((await postKey((await enroll(h, w.appA, 'DEV')).enrollment_id!, p256Key().base64)).status).toBe(201)
    // The bound comes after the other refusals: suspended, the enrollment is 409 enrollment_suspended.
    expect((await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/suspend`)).status).toBe(200)
    expectProblem(await postKey(e.enrollment_id!, p256Key().base64), 409, 'enrollment_suspended')
  })

  test('concurrent keysets of one enrollment near its bound never pass it', async () => {
    const e = await enroll(h, w.appA, 'DEV')
    await addRetiredKeysets(e.enrollment_id!, MAX_KEYSETS_PER_ENROLLMENT - 3)
    const answers = await Promise.all(Array.from({ length: 12 }, () => postKey(e.enrollment_id!, p256Key().base64)))
    const statuses = answers.map((res) => res.status).sort()
    expect(statuses).toEqual([...Array(3).fill(201), ...Array(9).fill(409)])
    for (const res of answers) if (res.status === 409) expectProblem(res, 409, 'too_many_keysets')
    const listed = await keysetsOf(e.enrollment_id!)
    expect(listed).toHaveLength(MAX_KEYSETS_PER_ENROLLMENT)
    expect(listed.filter((k) => k.state === 'active')).toHaveLength(1)
  })

  test('readable while the enrollment is suspended', async () => {
    const e = await enroll(h, w.appA, 'DEV')
    expect((await postKey(e.enrollment_id!, p256Key().base64)).status).toBe(201)
    const before = await keysetsOf(e.enrollment_id!)
    expect((await h.request('PATCH', `/api/enrollments/${e.enrollment_id}/suspend`)).status).toBe(200)
    expect(await keysetsOf(e.enrollment_id!)).toEqual(before)
  })

  test('malformed id 400; unknown 404; no token 401', async () => {
    expectProblem(await h.request('GET', path('x')), 400)
    expectProblem(await h.request('GET', path(crypto.randomUUID())), 404)
    const e = await enroll(h, w.appA, 'DEV')
    expectProblem(await h.request('GET', path(e.enrollment_id!), { token: null }), 401)
  })
})
