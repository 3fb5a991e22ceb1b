/**
 * Tokens over HTTP (docs/api.md "Tokens"): issue, view, list, revoke; the answers' exact shapes,
 * every status the routes give, revocation and expiry taking effect on the next request, and the
 * token string shown once and nowhere else. Roles and scope: the authorization matrix and the
 * isolation tests.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { hashToken, newToken, tokenIdOf } from '../../src/auth/tokens'
import { performTokenCommand } from '../../src/cli/token-commands'
import { createHarness, type ApiResponse, type Harness } from '../support/harness'
import { TIMESTAMP, timestampMicros, UUID_LOWER, expectProblem } from '../support/fixtures'

let h: Harness
let A: string
let AP: string
let B: string
beforeAll(async () => {
  h = await createHarness()
  A = await h.createCustomer('A')
  AP = await h.createPartner(A, 'AP')
  B = await h.createCustomer('B')
})
afterAll(() => h.close())

const TOKEN_KEYS = ['created', 'description', 'expires', 'organization_id', 'role', 'state', 'token_id']

async function issue(body: Record<string, unknown>, token?: string): Promise<ApiResponse> {
  const res = await h.request('POST', '/api/tokens', { body, token })
  if (res.status !== 201) throw new Error(`POST /api/tokens: ${res.status} ${JSON.stringify(res.body)}`)
  return res
}

const works = async (token: string) => (await h.request('GET', '/api/organizations', { token })).status

describe('POST /api/tokens', () => {
  test('201: the record, the token string once, no-store; the token works at once', async () => {
    const res = await issue({ organization_id: A.toUpperCase(), role: 'application_admin', ttl: '12h', description: 'CI' })
    expect(res.headers.get('cache-control')).toBe('no-store')
    expect(Object.keys(res.body).sort()).toEqual(['secret', 'token', 'trace_id'])
    expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
    const { token, secret } = res.body
    expect(Object.keys(token).sort()).toEqual(TOKEN_KEYS)
    expect(token).toMatchObject({ organization_id: A, role: 'application_admin', description: 'CI', state: 'active' })
    expect(token.token_id).toMatch(UUID_LOWER)
    expect(token.created).toMatch(TIMESTAMP)
    expect(timestampMicros(token.expires) - timestampMicros(token.created)).toBe(12 * 3600e6) // to the microsecond
    expect(secret).toMatch(/^kw2_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/)
    expect(tokenIdOf(secret)).toBe(token.token_id)
    expect(await works(secret)).toBe(200)
    // Shown this once: never again, not even as its hash.
    const view = await h.request('GET', `/api/tokens/${token.token_id}`)
    const list = await h.request('GET', '/api/tokens?page_size=1000')
    for (const answer of [view, list]) {
      expect(JSON.stringify(answer.body)).not.toContain(secret)
      expect(JSON.stringify(answer.body)).not.toContain(hashToken(secret))
      expect(answer.headers.get('cache-control')).toBeNull()
    }
    expect(h.logged.join('\n')).not.toContain(secret)
    // Never stored in a form that would let it be used (docs/api.md "Tokens"): its SHA-256 only.
    const stored = await h.storage.find('tokens', token.token_id)
    expect(stored?.token_hash).toBe(hashToken(secret))
    expect(JSON.stringify(stored)).not.toContain(secret)
  })

  test('defaults: 90 days, no description; `administrator` is admin; 366d is the longest', async () => {
    const plain = (await issue({ organization_id: A, role: 'administrator' })).body.token
    expect(plain).toMatchObject({ role: 'admin', description: null })
    expect(timestampMicros(plain.expires) - timestampMicros(plain.created)).toBe(90 * 86400e6)
    expect((await issue({ organization_id: A, role: 'viewer', ttl: '366d', description: null })).body.token.description).toBeNull()
    expect((await issue({ organization_id: A, role: 'viewer', ttl: '8784h' })).status).toBe(201)
  })

  test('400: a ttl past 366 days or malformed, an unknown role, a bad description, a missing or malformed organization_id', async () => {
    for (const body of [
      { organization_id: A, role: 'viewer', ttl: '367d' },
      { organization_id: A, role: 'viewer', ttl: '8785h' },
      { organization_id: A, role: 'viewer', ttl: '999999999d' },
      { organization_id: A, role: 'viewer', ttl: '0d' },
      { organization_id: A, role: 'viewer', ttl: '1y' },
      { organization_id: A, role: 'viewer', ttl: 86400 },
      { organization_id: A, role: 'root' },
      { organization_id: A, role: 'Admin' },
      { organization_id: A },
      { organization_id: A, role: 'viewer', description: '' },
      { organization_id: A, role: 'viewer', description: 'x'.repeat(1025) },
      { role: 'viewer' },
      { organization_id: 'not-a-uuid', role: 'viewer' },
    ]) {
      expectProblem(await h.request('POST', '/api/tokens', { body }), 400)
    }
    // The ttl's message says what is wrong with it: its form, zero, or too long (a long run of digits too).
    for (const [ttl, message] of [
      ['10 days', 'ttl must be a number and s, m, h or d, like 90d'],
      ['0s', 'ttl must be more than zero'],
      ['9999999999s', 'ttl must be at most 366d'],
      ['367d', 'ttl must be at most 366d'],
      // Small, but more digits than a ttl is read with: refused, not a token expired at its creation.
      ['000000000090d', 'ttl must be a number of at most nine digits and s, m, h or d, like 90d'],
    ]) {
      const res = await h.request('POST', '/api/tokens', { body: { organization_id: A, role: 'viewer', ttl } })
      expect([res.status, res.body.errors]).toEqual([400, [{ path: 'body.ttl', message }]])
    }
    expectProblem(await h.request('POST', '/api/tokens', { body: '{' }), 400)
    expectProblem(await h.request('POST', '/api/tokens'), 400)
    expectProblem(await h.request('POST', '/api/tokens', { body: 'x', headers: { 'content-type': 'text/plain' } }), 415)
  })

  test('404 for an unknown organization or one out of scope, before the role and the body', async () => {
    expectProblem(await h.request('POST', '/api/tokens', { body: { organization_id: crypto.randomUUID(), role: 'viewer' } }), 404)
    const customerAdmin = h.token(A)
    const partnerAdmin = h.token(AP)
    expectProblem(await h.request('POST', '/api/tokens', { token: customerAdmin, body: { organization_id: B, role: 'nonsense' } }), 404)
    expectProblem(await h.request('POST', '/api/tokens', { token: customerAdmin, body: { organization_id: h.vendorId, role: 'admin' } }), 404)
    expectProblem(await h.request('POST', '/api/tokens', { token: partnerAdmin, body: { organization_id: A, role: 'admin' } }), 404) // its customer
    expectProblem(await h.request('POST', '/api/tokens', { token: partnerAdmin, body: { organization_id: AP, role: 'viewer' } }), 403) // itself: no one
    expectProblem(await h.request('POST', '/api/tokens', { token: h.token(A, 'application_admin'), body: { organization_id: A, role: 'viewer', ttl: '999d' } }), 403)
    // A customer's admin issues for itself and its partners, any role.
    for (const org of [A, AP]) for (const role of ['admin', 'application_admin', 'viewer']) expect((await issue({ organization_id: org, role }, customerAdmin)).status).toBe(201)
  })

  test("a suspended organization's new token is refused until the organization is active again", async () => {
    const C = await h.createCustomer('C')
    expect((await h.request('PATCH', `/api/organizations/${C}/suspend`)).status).toBe(200)
    const { secret } = (await issue({ organization_id: C, role: 'viewer' })).body
    expect(await works(secret)).toBe(401)
    expect((await h.request('PATCH', `/api/organizations/${C}/activate`)).status).toBe(200)
    expect(await works(secret)).toBe(200)
  })
})

describe('GET /api/tokens/{token_id}', () => {
  test('200 with the record and the trace id; 400 for a malformed id; 404 for an unknown one', async () => {
    const { token } = (await issue({ organization_id: AP, role: 'viewer', description: 'partner reporting' })).body
    const res = await h.request('GET', `/api/tokens/${token.token_id.toUpperCase()}`)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ token, trace_id: res.headers.get('x-trace-id') })
    expectProblem(await h.request('GET', '/api/tokens/not-a-uuid'), 400, 'invalid_identifier')
    expectProblem(await h.request('GET', `/api/tokens/${crypto.randomUUID()}`), 404, 'not_found')
  })

  test("the same storage reads whether the token is the caller's, another tenant's or none (in database mode a read is a round trip: their number would time which ids exist)", async () => {
    const own = (await issue({ organization_id: A, role: 'viewer' })).body.token.token_id
    const foreign = (await issue({ organization_id: B, role: 'viewer' })).body.token.token_id
    const adminA = h.token(A, 'admin')
    await h.tokensRecorded()
    const { storage } = h
    const reads: string[] = []
    const spies = (['find', 'findWithParent', 'findMany', 'list'] as const).map((method) => {
      const original = (storage[method] as (...args: unknown[]) => unknown).bind(storage)
      return spyOn(storage, method).mockImplementation(((...args: unknown[]) => (reads.push(`${method} ${args[0] as string}`), original(...args))) as never)
    })
    try {
      const readsOf = async (id: string, status: number) => {
        reads.length = 0
        expect({ id, status: (await h.request('GET', `/api/tokens/${id}`, { token: adminA })).status }).toEqual({ id, status })
        return [...reads]
      }
      const ownReads = await readsOf(own, 200)
      expect(ownReads).toContain('findWithParent tokens')
      expect(await readsOf(foreign, 404)).toEqual(ownReads)
      expect(await readsOf(crypto.randomUUID(), 404)).toEqual(ownReads)
    } finally {
      for (const spy of spies) spy.mockRestore()
    }
  })

  test('an expired token is answered `expired` (derived), and is 401', async () => {
    const expired = h.token(A, 'viewer', -5)
    const res = await h.request('GET', `/api/tokens/${tokenIdOf(expired)}`)
    expect(res.body.token.state).toBe('expired')
    expect(timestampMicros(res.body.token.expires)).toBeLessThan(Date.now() * 1000)
    expect(await works(expired)).toBe(401)
  })
})

describe('GET /api/tokens', () => {
  let L: string
  let LP: string
  const ids = {} as Record<'l1' | 'lp1' | 'l2' | 'lp2' | 'expired', string>
  beforeAll(async () => {
    L = await h.createCustomer('Lists')
    LP = await h.createPartner(L, 'Lists partner')
    for (const [name, org] of [['l1', L], ['lp1', LP], ['l2', L], ['lp2', LP]] as const) ids[name] = (await issue({ organization_id: org, role: 'viewer' })).body.token.token_id
    ids.expired = tokenIdOf(h.token(L, 'viewer', -5))!
    await h.request('PATCH', `/api/tokens/${ids.l2}/revoke`)
  })

  const list = async (query: string, token?: string) => {
    const res = await h.request('GET', `/api/tokens?${query}`, { token })
    expect(res.status).toBe(200)
    return res.body
  }
  const idsOf = (body: { tokens: { token_id: string }[] }) => body.tokens.map((t) => t.token_id)

  test('the consumer list shape; creation order; order=desc; paging', async () => {
    const all = await list(`organization_ids=${L},${LP}`)
    expect(Object.keys(all).sort()).toEqual(['page_size', 'tokens', 'total'])
    expect(idsOf(all)).toEqual([ids.l1, ids.lp1, ids.l2, ids.lp2, ids.expired])
    expect(all.total).toBe(5)
    for (const token of all.tokens) expect(Object.keys(token).sort()).toEqual(TOKEN_KEYS)
    const page = await list(`organization_ids=${L}&organization_ids=${LP}&page=2&page_size=2&order=desc`)
    expect(page).toMatchObject({ total: 5, page: 2, page_size: 2 })
    expect(idsOf(page)).toEqual([ids.l2, ids.lp1])
    expect(await list(`organization_ids=${L}&page=7`)).toEqual({ tokens: [], total: 3, page: 7, page_size: 100 })
  })

  test('state: active, revoked, expired (derived from the expiry)', async () => {
    const of = async (state: string) => idsOf(await list(`organization_ids=${L},${LP}&state=${state}`))
    expect(await of('active')).toEqual([ids.l1, ids.lp1, ids.lp2])
    expect(await of('revoked')).toEqual([ids.l2])
    expect(await of('expired')).toEqual([ids.expired])
    // Several states are alternatives, repeated or comma-separated, as in every list (`revoked` with
    // another is an anyOf condition: every page and its total checked against the whole).
    const everyOne = [ids.l1, ids.lp1, ids.l2, ids.lp2, ids.expired]
    const expected: Record<string, string[]> = {
      'active,expired': [ids.l1, ids.lp1, ids.lp2, ids.expired],
      'active,revoked': [ids.l1, ids.lp1, ids.l2, ids.lp2],
      'expired,revoked': [ids.l2, ids.expired],
      'active,expired,revoked': everyOne,
    }
    for (const [states, want] of Object.entries(expected)) {
      expect({ states, got: await of(states) }).toEqual({ states, got: want })
      expect(idsOf(await list(`organization_ids=${L},${LP}&${states.split(',').map((s) => `state=${s}`).join('&')}&order=desc`))).toEqual([...want].reverse())
      for (const size of [1, 2, 3]) {
        for (let page = 1; page <= Math.ceil(want.length / size) + 1; page++) {
          for (const order of ['asc', 'desc'] as const) {
            const body = await list(`organization_ids=${L},${LP}&state=${states}&page=${page}&page_size=${size}&order=${order}`)
            const all = order === 'asc' ? want : [...want].reverse()
            expect({ states, page, size, order, total: body.total, got: idsOf(body) }).toEqual({ states, page, size, order, total: want.length, got: all.slice((page - 1) * size, page * size) })
          }
        }
      }
      expect(await list(`organization_ids=${L},${LP}&state=${states}&page=${Number.MAX_SAFE_INTEGER}&page_size=1000`)).toMatchObject({ tokens: [], total: want.length })
    }
    const unknown = await h.request('GET', '/api/tokens?state=suspended')
    expectProblem(unknown, 400)
    expect(unknown.body.detail).toBe('query.state.0: state must be active, revoked or expired')
    // valibot's own messages quote what they received (a token sent by mistake, here): never echoed.
    // (B's: a token of L issued here would be listed by the other tests of L, whatever their order.)
    const secret = (await h.request('POST', '/api/tokens', { body: { organization_id: B, role: 'viewer' } })).body.secret as string
    const misplaced = await h.request('POST', '/api/organizations', { body: { description: 'x', parent_id: L, supported_environments: secret } })
    expectProblem(misplaced, 400)
    expect(JSON.stringify(misplaced.body)).not.toContain(secret)
    expect(misplaced.body.detail).toBe('body.supported_environments: Invalid type: Expected Object but received a string')
    expectProblem(await h.request('GET', '/api/tokens?organization_ids=x'), 400)
  })

  test('a list reads the clock once: each token is answered in the state it was chosen for', async () => {
    // Tokens expiring a second apart, and a clock that moves a second per reading: were the filter
    // and the views to read it separately, a token expiring between the two would be listed as
    // `active` and answered `expired` (or the reverse).
    const E = await h.createCustomer('Expiring')
    for (let seconds = 1; seconds <= 40; seconds++) h.token(E, 'viewer', seconds)
    await h.tokensRecorded()
    let clock = h.storage.now() + 500_000
    const spy = spyOn(h.storage, 'now').mockImplementation(() => (clock += 1_000_000))
    try {
      for (let request = 0; request < 6; request++) {
        for (const state of ['active', 'expired'] as const) {
          const states = (await list(`organization_ids=${E}&state=${state}&page_size=1000`)).tokens.map((t: { state: string }) => t.state)
          expect(new Set(states)).toEqual(new Set(states.length ? [state] : []))
        }
      }
    } finally {
      spy.mockRestore()
    }
  })

  test("a customer's admin lists its own and its partners' tokens, by filter too; nothing else", async () => {
    // A customer of its own: its admin's token would otherwise be listed by the other tests of L.
    const M = await h.createCustomer('Own lists')
    const MP = await h.createPartner(M, 'Own lists partner')
    const m1 = (await issue({ organization_id: M, role: 'viewer' })).body.token.token_id
    const mp1 = (await issue({ organization_id: MP, role: 'viewer' })).body.token.token_id
    const admin = h.token(M)
    const own = await list('page_size=1000', admin)
    expect(idsOf(own)).toEqual([m1, mp1, tokenIdOf(admin)])
    expect(idsOf(await list(`organization_ids=${MP}`, admin))).toEqual([mp1])
    expect((await list(`organization_ids=${A},${L},${h.vendorId}`, admin)).total).toBe(0)
  })
})

describe('PATCH /api/tokens/{token_id}/revoke', () => {
  test('200 with the record revoked; the token is 401 from the next request on; again: 409', async () => {
    const { token, secret } = (await issue({ organization_id: A, role: 'admin' })).body
    expect(await works(secret)).toBe(200)
    const res = await h.request('PATCH', `/api/tokens/${token.token_id}/revoke`)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ token: { ...token, state: 'revoked' }, trace_id: res.headers.get('x-trace-id') })
    expect(await works(secret)).toBe(401)
    expectProblem(await h.request('PATCH', `/api/tokens/${token.token_id}/revoke`), 409, 'already_revoked')
    expectProblem(await h.request('PATCH', '/api/tokens/nope/revoke'), 400, 'invalid_identifier')
    expectProblem(await h.request('PATCH', `/api/tokens/${crypto.randomUUID()}/revoke`), 404)
    expectProblem(await h.request('PATCH', `/api/tokens/${token.token_id}/revoke`, { body: '{' }), 400)
  })

  test('a token may revoke itself: its own answer is 200, its next request 401', async () => {
    const { token, secret } = (await issue({ organization_id: A, role: 'admin' })).body
    expect((await h.request('PATCH', `/api/tokens/${token.token_id}/revoke`, { token: secret })).status).toBe(200)
    expect(await works(secret)).toBe(401)
  })

  test('revoked stays revoked, and answered so, even once it has expired', async () => {
    const short = h.token(A, 'viewer', -1)
    expect((await h.request('PATCH', `/api/tokens/${tokenIdOf(short)}/revoke`)).body.token.state).toBe('revoked')
  })
})

describe("expiry is judged by the storage's clock (docs/storage.md \"Embedded\" and \"Time\"), not by this machine's system clock", () => {
  test("past `expires` by the storage's clock: 401 and `expired`, whatever Date.now() says; a system clock set back revives nothing", async () => {
    const { token, secret } = (await issue({ organization_id: A, role: 'viewer', ttl: '1h' })).body
    const expires = timestampMicros(token.expires)
    const storageNow = spyOn(h.storage, 'now').mockImplementation(() => expires + 1)
    // The system clock a day behind (as after an NTP step back): it must not matter.
    const realDateNow = Date.now
    const systemClock = spyOn(Date, 'now').mockImplementation(() => realDateNow() - 86_400_000)
    try {
      expect(await works(secret)).toBe(401)
      expect((await h.request('GET', `/api/tokens/${token.token_id}`)).body.token.state).toBe('expired')
      const listed = await h.request('GET', `/api/tokens?organization_ids=${A}&state=expired`)
      expect(listed.body.tokens.map((t: { token_id: string }) => t.token_id)).toContain(token.token_id)
    } finally {
      systemClock.mockRestore()
      storageNow.mockRestore()
    }
    expect(await works(secret)).toBe(200)
  })
})

describe("the CLI's issue-token command (src/cli/token-commands.ts)", () => {
  test('sent again after its answer was lost (a server stopping): the token is recorded once, with one event, and the answer is the same', async () => {
    const { tokenId, tokenHash, token } = newToken()
    const command = { command: 'issue-token', organization_id: A, role: 'viewer', ttl_seconds: 3600, description: null, token_id: tokenId, token_hash: tokenHash } as const
    expect(await performTokenCommand(h.storage, command)).toEqual({ issued: tokenId })
    expect(await performTokenCommand(h.storage, command)).toEqual({ issued: tokenId })
    expect(await works(token)).toBe(200)
    const events = await h.request('GET', `/api/audit-events?target_ids=${tokenId}`)
    expect(events.body.audit_events.map((event: { action: string }) => event.action)).toEqual(['token.create'])
    // Another token under that id is no retry: refused, nothing changed.
    const other = newToken()
    await expect(performTokenCommand(h.storage, { ...command, token_hash: other.tokenHash })).rejects.toThrow(`a token ${tokenId} is recorded already`)
    expect(await works(token)).toBe(200)
  })
})

describe('the token is read from the Authorization header only', () => {
  test('a token in the query string or a cookie is ignored: 401', async () => {
    for (const [path, headers] of [
      [`/api/organizations?access_token=${h.vendorToken}`, {}],
      ['/api/organizations', { cookie: `token=${h.vendorToken}` }],
      ['/api/organizations', { 'x-api-key': h.vendorToken }],
    ] as const) {
      expectProblem(await h.request('GET', path, { token: null, headers }), 401)
    }
  })
})
