/**
 * An app on a fresh store, called through `app.handle` (no network), with helpers to issue tokens
 * and to build the usual tenant layout. The store is the embedded one on a new data dir, or with
 * KEYWARD_TEST_STORE=postgres a new PostgreSQL database (test/support/database.ts), dropped by
 * `close`: the same HTTP tests run on both.
 */
import { rmSync } from 'node:fs'
import { createApp } from '../../src/app'
import { Store, type StoreOptions } from '../../src/store/store'
import { initialiseStorage } from '../../src/cli/init'
import { prepareDatabase } from '../../src/cli/database'
import { EmbeddedStorage } from '../../src/storage/embedded'
import { PostgresStorage } from '../../src/storage/postgres'
import type { Storage } from '../../src/storage/storage'
import { newToken, TokenVerifier, type Role } from '../../src/auth/tokens'
import { createToken } from '../../src/modules/tokens/service'
import { createTestDatabase, TEST_STORE } from './database'
import { answerChecker, type AnswerCheck } from './openapi-check'
import { createLogger } from '../../src/ops/logger'
import { Metrics } from '../../src/ops/metrics'
import type { RateLimiter } from '../../src/ops/rate-limit'
import { tempDir } from './temp-dirs'

/** The header a test sets to say which client address a request comes from (`app.handle` has no socket). */
export const CLIENT_ADDRESS_HEADER = 'x-test-client-address'

export interface ApiResponse {
  readonly status: number
  readonly headers: Headers
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any
}

export interface RequestOptions {
  readonly token?: string | null
  /** Sent as JSON unless a string (sent as is). */
  readonly body?: unknown
  readonly headers?: Record<string, string>
}

export type Harness = Awaited<ReturnType<typeof createHarness>>

/** A new, initialised store of the kind the tests run on, with what the harness needs of it. */
interface TestStore {
  readonly storage: Storage
  /** The embedded engine under `storage` (for tests of the embedded store only). */
  readonly store?: Store
  readonly vendorId: string
  readonly vendorToken: string
  close(): Promise<void>
}

async function embeddedStore(options: StoreOptions | undefined): Promise<TestStore> {
  const dir = tempDir()
  const store = await Store.open(dir, { log: () => {}, ...options })
  const storage = new EmbeddedStorage(store)
  const { organization_id: vendorId, token: vendorToken } = await initialiseStorage(storage, 'Vendor', 'init')
  const close = async () => {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }
  return { storage, store, vendorId, vendorToken, close }
}

async function postgresStore(): Promise<TestStore> {
  const database = await createTestDatabase()
  // A small pool: test files run one after another, each on its own database.
  const storage = PostgresStorage.connect(database.url, { maxConnections: 4 })
  const { organization_id: vendorId, token: vendorToken } = (await prepareDatabase(storage, 'Vendor', true, 'the test database'))!
  const close = async () => {
    await storage.close()
    await database.drop()
  }
  return { storage, vendorId, vendorToken, close }
}

export interface HarnessOptions {
  readonly autoVerifyInstallations?: boolean
  readonly corsOrigins?: string[]
  readonly store?: StoreOptions
  /** Rate limits, as `serve --rate-limit` makes them (give it a clock of the test's own); default none. */
  readonly rateLimiter?: RateLimiter
}

export async function createHarness(options: HarnessOptions = {}) {
  const testStore = TEST_STORE === 'postgres' ? await postgresStore() : await embeddedStore(options.store)
  const { storage, vendorId, vendorToken, close } = testStore
  /** The app's log, one JSON line each (requests, faults). */
  const logged: string[] = []
  const metrics = new Metrics()
  const app = createApp({
    storage,
    verifier: new TokenVerifier(),
    config: {
      publicUrl: 'http://keyward.test',
      autoVerifyInstallations: options.autoVerifyInstallations ?? false,
      ...(options.corsOrigins ? { corsOrigins: options.corsOrigins } : {}),
    },
    logger: createLogger('json', (line) => logged.push(line)),
    metrics,
    rateLimiter: options.rateLimiter ?? null,
    clientAddress: (request) => request.headers.get(CLIENT_ADDRESS_HEADER) ?? 'test-client',
  })

  /** Token records being written: every request waits for them, so a token works from the next request on. */
  const issuing = new Set<Promise<unknown>>()
  const tokensRecorded = () => Promise.all(issuing)

  /**
   * A token of `org` with `role`, recorded through the storage as `keyward issue-token` records one
   * (with its `token.create` event). The string is known at once; the record follows in a moment,
   * and `request` (or `tokensRecorded`, for callers of `app.handle`) waits for it. A negative
   * `ttlSeconds` makes an expired token.
   */
  const token = (org: string, role: Role = 'admin', ttlSeconds = 3600) => {
    const issued = newToken()
    const recorded = storage.transaction(async (tx) => {
      const organization = await tx.find('organizations', org)
      if (!organization) throw new Error(`harness: no organization ${org} to issue a token for`)
      return createToken(tx, { organization, role, ttlSeconds, description: null }, { cli: 'issue-token' }, issued)
    })
    issuing.add(recorded)
    recorded.finally(() => issuing.delete(recorded))
    return issued.token
  }

  let checkAnswer: AnswerCheck | undefined
  /** Every answer is checked against the app's OpenAPI document (see openapi-check.ts). */
  async function documented(method: string, path: string, answer: ApiResponse): Promise<ApiResponse> {
    checkAnswer ??= answerChecker(await (await app.handle(new Request('http://localhost/openapi.json'))).text())
    checkAnswer(method, path, answer)
    return answer
  }

  async function request(method: string, path: string, init: RequestOptions = {}): Promise<ApiResponse> {
    await tokensRecorded()
    const headers: Record<string, string> = { ...init.headers }
    const auth = init.token === undefined ? vendorToken : init.token
    if (auth !== null) headers.authorization ??= `Bearer ${auth}`
    let body: string | undefined
    if (init.body !== undefined) {
      body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body)
      headers['content-type'] ??= 'application/json'
    }
    const response = await app.handle(new Request(`http://localhost${path}`, { method, headers, body }))
    const text = await response.text()
    let parsed: unknown = text
    try {
      parsed = text ? JSON.parse(text) : undefined
    } catch {}
    return documented(method, path, { status: response.status, headers: response.headers, body: parsed })
  }

  /** A customer (enabled for virtual environments when `environments` is given) with its tokens. */
  async function createCustomer(description = 'Customer', environments?: { default: string; supported: string }) {
    const res = await request('POST', '/api/organizations', {
      body: { description, parent_id: vendorId, ...(environments ? { supported_environments: environments } : {}) },
    })
    if (res.status !== 201) throw new Error(`customer create failed: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body.organization.organization_id as string
  }

  async function createPartner(customerId: string, description = 'Partner') {
    const res = await request('POST', '/api/organizations', { body: { description, parent_id: customerId } })
    if (res.status !== 201) throw new Error(`partner create failed: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body.organization.organization_id as string
  }

  /** The embedded engine, for tests of the embedded store only (test/unit). */
  const store = testStore.store!
  return { storage, store, app, vendorId, vendorToken, token, tokensRecorded, request, createCustomer, createPartner, logged, metrics, close }
}
