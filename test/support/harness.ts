/**
 * An app on a fresh data dir, called through `app.handle` (no network), with helpers to issue
 * tokens and to build the usual tenant layout.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../../src/app'
import { Store, type StoreOptions } from '../../src/store/store'
import { initialiseStorage } from '../../src/cli/init'
import { EmbeddedStorage } from '../../src/storage/embedded'
import { newToken, TokenVerifier, type Role } from '../../src/auth/tokens'
import { createToken } from '../../src/modules/tokens/service'

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

export function tempDir(prefix = 'keyward-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix))
}

export async function createHarness(options: { autoVerifyInstallations?: boolean; store?: StoreOptions } = {}) {
  const dir = tempDir()
  const store = await Store.open(dir, { log: () => {}, ...options.store })
  const storage = new EmbeddedStorage(store)
  const { organization_id: vendorId, token: vendorToken } = await initialiseStorage(storage, 'Vendor', 'init')
  const logged: string[] = []
  const app = createApp(
    {
      storage,
      verifier: new TokenVerifier(),
      config: { publicUrl: 'http://keyward.test', autoVerifyInstallations: options.autoVerifyInstallations ?? false },
    },
    (line) => logged.push(line),
  )

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
    const organization = storage.find('organizations', org)
    if (!organization) throw new Error(`harness: no organization ${org} to issue a token for`)
    const issued = newToken()
    const recorded = storage.transaction((tx) => createToken(tx, { organization, role, ttlSeconds, description: null }, { cli: 'issue-token' }, issued))
    issuing.add(recorded)
    recorded.finally(() => issuing.delete(recorded))
    return issued.token
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
    return { status: response.status, headers: response.headers, body: parsed }
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

  async function close() {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }

  return { dir, store, storage, app, vendorId, vendorToken, token, tokensRecorded, request, createCustomer, createPartner, logged, close }
}
