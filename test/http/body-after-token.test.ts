/**
 * No body is read before the token is checked (docs/security.md): an anonymous request costs
 * no body reading or JSON parsing, and GET routes carry no parse hook at all (one would make Elysia
 * compile them async; test/unit/read-routes.test.ts checks that they compile synchronously). The order of the answers themselves (401, 413, 415,
 * ...) is checked in errors.test.ts.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { MAX_BODY_BYTES } from '../../src/http/body'
import { takesBody } from '../../src/http/context'
import { createHarness, type Harness } from '../support/harness'

let h: Harness
beforeAll(async () => (h = await createHarness()))
afterAll(() => h.close())

interface RouteView {
  readonly method: string
  readonly path: string
  readonly hooks: { parse?: { fn: unknown }[]; transform?: { fn: unknown }[] }
}
const routes = () => h.app.routes as unknown as RouteView[]
const bodyRoutes = () => routes().filter((r) => r.method !== 'GET' && r.path.startsWith('/api/'))

/** 32,000 levels of `[`, padded to the 64 KiB limit: the costliest body JSON.parse can be handed. */
const NESTED = '['.repeat(32_000).padEnd(MAX_BODY_BYTES, ' ')

/** Status of `method path` with `body`, called on the app directly (the harness parses answers with JSON.parse). */
async function statusOf(method: string, path: string, authorization: string | null): Promise<number> {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (authorization !== null) headers.authorization = authorization
  const response = await h.app.handle(new Request(`http://localhost${path}`, { method, headers, body: NESTED }))
  await response.arrayBuffer()
  return response.status
}

const concrete = (path: string) => path.replace(/:[a-z_]+/g, crypto.randomUUID())

describe('bodies are read after the token is checked', () => {
  test('64 KiB of "[" without a token, or with a bad one, on every route that takes a body: 401, JSON.parse never called', async () => {
    expect(bodyRoutes().length).toBeGreaterThan(20)
    const parse = spyOn(JSON, 'parse')
    try {
      for (const route of bodyRoutes()) {
        for (const authorization of [null, 'Bearer not-a-token', `Bearer ${h.vendorToken}x`]) {
          const status = await statusOf(route.method, concrete(route.path), authorization)
          expect({ route: `${route.method} ${route.path}`, status }).toEqual({ route: `${route.method} ${route.path}`, status: 401 })
        }
      }
      expect(parse).toHaveBeenCalledTimes(0)
      // The control: with a valid token the same body is read and parsed (then refused as not JSON).
      expect(await statusOf('POST', '/api/organizations', `Bearer ${h.vendorToken}`)).toBe(400)
      expect(parse.mock.calls.length).toBeGreaterThan(0)
    } finally {
      parse.mockRestore()
    }
  })

  test('Elysia parses no route body itself: routes that take one say "none" and read it in their own transform', () => {
    for (const route of bodyRoutes()) {
      const name = `${route.method} ${route.path}`
      expect({ name, parse: route.hooks.parse?.map((hook) => hook.fn) }).toEqual({ name, parse: ['none'] })
      // After `authenticated`'s derive: a route's own hooks come after its plugins'.
      const transforms = route.hooks.transform?.map((hook) => hook.fn) ?? []
      expect({ name, last: transforms.at(-1) === takesBody.transform, count: transforms.length }).toEqual({ name, last: true, count: 2 })
    }
  })

  test('GET routes have no parse hook at all', () => {
    const gets = routes().filter((r) => r.method === 'GET')
    expect(gets.length).toBeGreaterThan(10)
    for (const route of gets) expect({ path: route.path, parse: route.hooks.parse ?? [] }).toEqual({ path: route.path, parse: [] })
  })
})
