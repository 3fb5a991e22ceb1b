/**
 * Bearer authentication (docs/api.md "Authentication, roles and scope"): every 401 case, the scheme's case, suspended
 * organizations and partners of suspended customers, and recovery after activation.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createHmac, randomBytes } from 'node:crypto'
import { newToken, tokenIdOf, type Role } from '../../src/auth/tokens'
import { createHarness, type ApiResponse, type Harness } from '../support/harness'
import { createApplication, enroll, requestOk } from '../support/fixtures'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

function expect401(res: ApiResponse, secret?: string) {
  expect(res.status).toBe(401)
  expect(res.headers.get('content-type')).toBe('application/problem+json')
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/)
  expect(res.body).toMatchObject({ type: 'about:blank', title: 'Unauthorized', status: 401, code: 'unauthorized' })
  expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
  // No echo of the token.
  if (secret) expect(JSON.stringify(res.body)).not.toContain(secret)
}

const withHeader = (authorization: string) => h.request('GET', '/api/organizations', { token: null, headers: { authorization } })

describe('the Authorization header', () => {
  test('missing: 401', async () => {
    expect401(await h.request('GET', '/api/organizations', { token: null }))
    expect401(await h.request('GET', `/api/organizations/${h.vendorId}`, { token: null }))
    expect401(await h.request('POST', '/api/organizations', { token: null, body: { description: 'x', parent_id: h.vendorId } }))
  })

  test('the scheme is case-insensitive', async () => {
    for (const scheme of ['Bearer', 'bearer', 'BEARER', 'bEaReR']) {
      const res = await withHeader(`${scheme} ${h.vendorToken}`)
      expect({ scheme, status: res.status }).toEqual({ scheme, status: 200 })
    }
    // Other blanks around the token, as the pattern allows them (src/http/auth.ts takes `Bearer <token>` without it).
    for (const header of [`Bearer\t${h.vendorToken}`, `Bearer  ${h.vendorToken}`, `Bearer ${h.vendorToken} `, `bearer ${h.vendorToken}\t`]) {
      expect({ header, status: (await withHeader(header)).status }).toEqual({ header, status: 200 })
    }
  })

  test('malformed headers and wrong schemes: 401', async () => {
    const t = h.vendorToken
    // The last two are as long as `Bearer <token>`, with a blank inside the token or before the scheme.
    const blankInside = `Bearer ${t.slice(0, 40)} ${t.slice(41)}`
    const blankFirst = ` Bearer ${t.slice(0, -1)}`
    for (const header of [t, `Basic ${t}`, `Token ${t}`, `Bearer`, `Bearer `, `Bearer ${t} extra`, `Bearer${t}`, `Bearer: ${t}`, `Bearer "${t}"`, blankInside, blankFirst]) {
      expect401(await withHeader(header), t)
    }
  })

  test('two Authorization headers, even both valid: 401 saying to send one', async () => {
    const headers = new Headers()
    headers.append('authorization', `Bearer ${h.vendorToken}`)
    headers.append('authorization', `Bearer ${h.vendorToken}`)
    const res = await h.app.handle(new Request('http://localhost/api/organizations', { headers }))
    expect(res.status).toBe(401)
    expect(((await res.json()) as { detail: string }).detail).toBe('Send one Authorization: Bearer <token> header, not several.')
  })

  test('tokens that are not ours: garbage, cut, grown, another spelling, another secret, no record', async () => {
    const t = h.vendorToken
    expect(t).toMatch(/^kw2_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/)
    const [, id, secret] = t.split('_') as [string, string, string]
    const other = h.token(await h.createCustomer('Other'))
    const [, otherId, otherSecret] = other.split('_') as [string, string, string]
    // The last character of 32 bytes in base64url carries 4 bits and 2 of padding: with the lowest
    // bit flipped it spells the same bytes to a decoder that ignores padding bits, yet is another spelling.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
    const last = alphabet.indexOf(secret.at(-1)!)
    const sameBytes = `kw2_${id}_${secret.slice(0, -1)}${alphabet[last ^ 1]}`
    const cases = [
      'not-a-token',
      'kw2_',
      t.slice(0, -1),
      `${t}A`,
      `KW2_${id}_${secret}`,
      `kw2_${id.toUpperCase()}_${secret}`,
      `kw2-${id}-${secret}`,
      `kw2_${id}_${secret.slice(0, -1)}=`,
      sameBytes,
      `kw2_${id}_${otherSecret}`, // this record, another token's secret
      `kw2_${otherId}_${secret}`,
      newToken().token, // well-formed, never recorded
      `kw2_${id}_${randomBytes(32).toString('base64url')}`,
      t.repeat(40), // long: refused before anything is hashed
    ]
    for (const token of cases) expect401(await h.request('GET', '/api/organizations', { token }), token)
    expect((await h.request('GET', '/api/organizations', { token: t })).status).toBe(200)
  })

  test('tokens of earlier versions (kw1, HMAC-signed, no record) are 401', async () => {
    const claims = Buffer.from(JSON.stringify({ org: h.vendorId, role: 'admin', exp: 4e9, nonce: 'x' })).toString('base64url')
    const signature = createHmac('sha256', randomBytes(32)).update('kw1.').update(claims).digest('base64url')
    expect401(await h.request('GET', '/api/organizations', { token: `kw1.${claims}.${signature}` }))
  })

  test('a valid token spelled any other way is 401 (docs/api.md "Tokens"), however long', async () => {
    const t = h.vendorToken
    const last = t.at(-1)!
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
    const otherTrailingBits = t.slice(0, -1) + alphabet[alphabet.indexOf(last) | 3]
    for (const token of [`${t}=`, `${t}!`, t.replaceAll('-', '+').replaceAll('_', '/'), otherTrailingBits, `${t}${'!'.repeat(15_000)}`]) {
      if (token === t) continue
      expect401(await h.request('GET', '/api/organizations', { token }), t)
    }
    expect((await h.request('GET', '/api/organizations', { token: t })).status).toBe(200)
  })

  test('an expired token: 401; one issued with time left: 200', async () => {
    expect401(await h.request('GET', '/api/organizations', { token: h.token(h.vendorId, 'admin', -1) }))
    expect401(await h.request('GET', '/api/organizations', { token: h.token(h.vendorId, 'viewer', -3600) }))
    expect((await h.request('GET', '/api/organizations', { token: h.token(h.vendorId, 'viewer', 60) })).status).toBe(200)
  })

  test('a revoked token: 401 from the next request on, whatever happens to its organization', async () => {
    const C = await h.createCustomer('Revoked')
    const token = h.token(C)
    const id = `${token.slice(4, 12)}-${token.slice(12, 16)}-${token.slice(16, 20)}-${token.slice(20, 24)}-${token.slice(24, 36)}`
    expect((await h.request('GET', '/api/organizations', { token })).status).toBe(200)
    expect((await h.request('PATCH', `/api/tokens/${id}/revoke`)).status).toBe(200)
    expect401(await h.request('GET', '/api/organizations', { token }))
    expect((await h.request('PATCH', `/api/organizations/${C}/suspend`)).status).toBe(200)
    expect((await h.request('PATCH', `/api/organizations/${C}/activate`)).status).toBe(200)
    expect401(await h.request('GET', '/api/organizations', { token }))
  })

  test('every /api route asks for a token, even with an unknown or malformed id', async () => {
    const id = crypto.randomUUID()
    const routes: [string, string][] = [
      ['GET', '/api/organizations'],
      ['POST', '/api/organizations'],
      ['GET', `/api/organizations/${id}`],
      ['PATCH', `/api/organizations/${id}`],
      ['PATCH', `/api/organizations/${id}/suspend`],
      ['PATCH', `/api/organizations/${id}/activate`],
      ['GET', `/api/organizations/${id}/environments`],
      ['PATCH', `/api/organizations/${id}/environments`],
      ['DELETE', `/api/organizations/${id}/environments`],
      ['GET', '/api/organizations/not-a-uuid'],
      ['PATCH', '/api/organizations/not-a-uuid/suspend'],
    ]
    for (const [method, route] of routes) {
      const res = await h.request(method, route, { token: null, body: method === 'GET' ? undefined : { description: '' } })
      expect({ method, route, status: res.status }).toEqual({ method, route, status: 401 })
    }
  })

  test('/healthz and /openapi.json need no token and ignore a bad one', async () => {
    for (const route of ['/healthz', '/openapi.json']) {
      expect((await h.request('GET', route, { token: null })).status).toBe(200)
      expect((await h.request('GET', route, { token: 'garbage' })).status).toBe(200)
    }
  })
})

describe('suspended organizations', () => {
  const ROLES: Role[] = ['admin', 'application_admin', 'viewer']

  async function works(org: string): Promise<number[]> {
    const statuses: number[] = []
    for (const role of ROLES) statuses.push((await h.request('GET', `/api/organizations/${org}`, { token: h.token(org, role) })).status)
    return statuses
  }

  test("a suspended customer's tokens are 401, its partners' too; activation restores both", async () => {
    const C = await h.createCustomer('C')
    const P = await h.createPartner(C)
    const other = await h.createCustomer('Other')
    const tokenBefore = h.token(C)
    expect(await works(C)).toEqual([200, 200, 200])
    expect(await works(P)).toEqual([200, 200, 200])

    expect((await h.request('PATCH', `/api/organizations/${C}/suspend`)).status).toBe(200)
    expect(await works(C)).toEqual([401, 401, 401])
    expect(await works(P)).toEqual([401, 401, 401])
    expect401(await h.request('GET', '/api/organizations', { token: tokenBefore }))
    // Every route, writes included.
    expect401(await h.request('POST', '/api/organizations', { token: tokenBefore, body: { description: 'x' } }))
    expect401(await h.request('PATCH', `/api/organizations/${P}/suspend`, { token: tokenBefore }))
    // Other tenants are not affected.
    expect(await works(other)).toEqual([200, 200, 200])

    expect((await h.request('PATCH', `/api/organizations/${C}/activate`)).status).toBe(200)
    expect(await works(C)).toEqual([200, 200, 200])
    expect(await works(P)).toEqual([200, 200, 200])
    // A token minted before the suspension works again too.
    expect((await h.request('GET', '/api/organizations', { token: tokenBefore })).status).toBe(200)
  })

  test("a suspended partner's tokens are 401 while its customer's work; activation restores them", async () => {
    const C = await h.createCustomer('C')
    const P = await h.createPartner(C)
    const Q = await h.createPartner(C)
    const admin = h.token(C)
    expect((await h.request('PATCH', `/api/organizations/${P}/suspend`, { token: admin })).status).toBe(200)
    expect(await works(P)).toEqual([401, 401, 401])
    expect(await works(Q)).toEqual([200, 200, 200])
    expect(await works(C)).toEqual([200, 200, 200])
    expect((await h.request('PATCH', `/api/organizations/${P}/activate`, { token: admin })).status).toBe(200)
    expect(await works(P)).toEqual([200, 200, 200])
  })

  test('a partner suspended under a suspended customer stays 401 until both are active', async () => {
    const C = await h.createCustomer('C')
    const P = await h.createPartner(C)
    await h.request('PATCH', `/api/organizations/${P}/suspend`)
    await h.request('PATCH', `/api/organizations/${C}/suspend`)
    await h.request('PATCH', `/api/organizations/${C}/activate`)
    expect(await works(P)).toEqual([401, 401, 401])
    await h.request('PATCH', `/api/organizations/${P}/activate`)
    expect(await works(P)).toEqual([200, 200, 200])
  })

  test("a suspended customer's tokens, and its partners', are 401 on every /api route, for its own records too; nothing changes", async () => {
    const C = await h.createCustomer('C')
    const P = await h.createPartner(C)
    const application = await createApplication(h, C)
    const enrollment = await enroll(h, application.application_id!, 'PRODUCTION')
    const token = (await requestOk(h, 'POST', '/api/tokens', { organization_id: C, role: 'viewer' })).token.token_id
    // Each path parameter as one of C's own records: the 401 comes before any lookup.
    const ids: Record<string, string> = {
      organization_id: C,
      application_id: application.application_id!,
      consumer_id: enrollment.consumer_id!,
      installation_id: enrollment.installation_id!,
      enrollment_id: enrollment.enrollment_id!,
      token_id: token,
    }
    const routes = h.app.routes.filter((route) => route.path.startsWith('/api/') && route.method !== 'OPTIONS')
    expect(routes.length).toBeGreaterThan(40)
    const bearers = [h.token(C), h.token(C, 'viewer'), h.token(P), h.token(P, 'application_admin')]
    const eventsBefore = (await requestOk(h, 'GET', `/api/audit-events?customer_ids=${C}&page_size=1`)).total
    expect((await h.request('PATCH', `/api/organizations/${C}/suspend`)).status).toBe(200)
    for (const bearer of bearers) {
      for (const route of routes) {
        const path = route.path.replace(/:(\w+)/g, (_, name: string) => ids[name] ?? `unknown ${name}`)
        const res = await h.request(route.method, path, { token: bearer, body: route.method === 'GET' ? undefined : { description: 'x' } })
        expect({ route: `${route.method} ${route.path}`, status: res.status }).toEqual({ route: `${route.method} ${route.path}`, status: 401 })
        expect401(res, bearer)
      }
    }
    expect((await requestOk(h, 'GET', `/api/audit-events?customer_ids=${C}&page_size=1`)).total).toBe(eventsBefore + 1) // the suspension
  })

  test('the vendor token keeps working whatever is suspended', async () => {
    const C = await h.createCustomer('C')
    await h.request('PATCH', `/api/organizations/${C}/suspend`)
    expect((await h.request('GET', `/api/organizations/${C}`)).body.organization.state).toBe('suspended')
  })
})

describe('a request in flight when its token loses its right to act', () => {
  /**
   * POST `body` to `path` with `token`, its body held back until `release`: `reading` is true once
   * the server asks for the body, which it does only after the token was checked (docs/api.md,
   * "Status codes and errors": nothing is read before the token).
   */
  function heldBack(path: string, token: string, body: unknown) {
    const reading = Promise.withResolvers<void>()
    const release = Promise.withResolvers<void>()
    let sent = false
    const stream = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          if (sent) return controller.close()
          reading.resolve()
          await release.promise
          controller.enqueue(new TextEncoder().encode(JSON.stringify(body)))
          sent = true
        },
      },
      { highWaterMark: 0 },
    )
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' }
    const answer = h.app.handle(new Request(`http://localhost${path}`, { method: 'POST', headers, body: stream }))
    // An answer made without reading the body (a refusal) ends the wait for it too: `reading` then says false.
    return { reading: Promise.race([reading.promise.then(() => true), answer.then(() => false)]), release: () => release.resolve(), answer }
  }

  test('revoked while its body arrives: 401, and it changes nothing (it would have minted a token)', async () => {
    const C = await h.createCustomer('In flight')
    const token = h.token(C)
    await h.tokensRecorded()
    const request = heldBack('/api/tokens', token, { organization_id: C, role: 'admin' })
    expect(await request.reading).toBe(true)
    expect((await h.request('PATCH', `/api/tokens/${tokenIdOf(token)}/revoke`)).status).toBe(200)
    request.release()
    const answer = await request.answer
    expect(answer.status).toBe(401)
    expect((await h.request('GET', `/api/tokens?organization_ids=${C}&state=active`)).body.total).toBe(0)
  })

  test("its customer suspended while a partner's body arrives: 401, and nothing is created", async () => {
    const C = await h.createCustomer('In flight')
    const P = await h.createPartner(C)
    const consumer = crypto.randomUUID()
    const token = h.token(P)
    await h.tokensRecorded()
    const request = heldBack('/api/consumers', token, { consumer_id: consumer })
    expect(await request.reading).toBe(true)
    expect((await h.request('PATCH', `/api/organizations/${C}/suspend`)).status).toBe(200)
    request.release()
    expect((await request.answer).status).toBe(401)
    expect((await h.request('GET', `/api/consumers/${consumer}`)).status).toBe(404)
  })
})
