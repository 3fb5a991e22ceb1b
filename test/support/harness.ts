/**
 * An app on a fresh data dir, called through `app.handle` (no network), with helpers to mint
 * tokens and to build the usual tenant layout.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApp } from '../../src/app'
import { Store, type StoreOptions } from '../../src/store/store'
import { initialiseStorage } from '../../src/cli/init'
import { EmbeddedStorage } from '../../src/storage/embedded'
import { readSecret } from '../../src/auth/secret'
import { mintToken, TokenVerifier, type Role } from '../../src/auth/tokens'
import { answerChecker, type AnswerCheck } from './openapi-check'

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

export async function createHarness(options: { autoVerifyInstallations?: boolean; corsOrigins?: string[]; store?: StoreOptions } = {}) {
  const dir = tempDir()
  const store = await Store.open(dir, { log: () => {}, ...options.store })
  const storage = new EmbeddedStorage(store)
  const { organization_id: vendorId, token: vendorToken } = await initialiseStorage(storage, dir, 'Vendor')
  const secret = (await readSecret(dir))!
  const logged: string[] = []
  const app = createApp(
    {
      storage,
      verifier: new TokenVerifier(secret),
      config: {
        publicUrl: 'http://keyward.test',
        autoVerifyInstallations: options.autoVerifyInstallations ?? false,
        ...(options.corsOrigins ? { corsOrigins: options.corsOrigins } : {}),
      },
    },
    (line) => logged.push(line),
  )

  const token = (org: string, role: Role = 'admin', ttlSeconds = 3600) =>
    mintToken(secret, { org, role, exp: Math.floor(Date.now() / 1000) + ttlSeconds })

  let checkAnswer: AnswerCheck | undefined
  /** Every answer is checked against the app's OpenAPI document (see openapi-check.ts). */
  async function documented(method: string, path: string, answer: ApiResponse): Promise<ApiResponse> {
    checkAnswer ??= answerChecker(await (await app.handle(new Request('http://localhost/openapi.json'))).text())
    checkAnswer(method, path, answer)
    return answer
  }

  async function request(method: string, path: string, init: RequestOptions = {}): Promise<ApiResponse> {
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

  async function close() {
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }

  return { dir, store, storage, app, vendorId, vendorToken, token, request, createCustomer, createPartner, logged, close }
}
