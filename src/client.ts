/**
 * A typed client for code in a keyward checkout (Bun): `import { client } from 'keyward/client'`.
 * It is Eden treaty typed from the app itself, so paths, methods and answers are checked by the
 * compiler against this version of the server; its types need keyward's own tsconfig. Projects of
 * their own generate a client from GET /openapi.json instead (docs/api.md, "The OpenAPI document,
 * the page and clients").
 *
 *   const api = client('http://127.0.0.1:3000', token)
 *   const { data, error, status } = await api.api.organizations({ organization_id: id }).get()
 *   if (error) console.log((error.value as unknown as Problem).code)
 */
import { treaty } from '@elysiajs/eden'
import type { InferOutput } from 'valibot'
import type { App } from './app'
import type { ProblemBody } from './http/errors'

export function client(baseUrl: string, token: string) {
  return treaty<App>(baseUrl, { headers: { authorization: `Bearer ${token}` } })
}

export type KeywardClient = ReturnType<typeof client>

/** Every error's body (`error.value` of a failed call): RFC 9457 with a stable `code`. */
export type Problem = InferOutput<typeof ProblemBody>
