/**
 * A typed client for code in a keyward checkout (Bun): `import { client } from 'keyward/client'`.
 * It is Eden treaty typed from the app itself, so paths, methods and answers are checked by the
 * compiler against this version of the server; its types need keyward's own tsconfig. Projects of
 * their own generate a client from GET /openapi.json instead (docs/api.md, "The OpenAPI document,
 * the page and clients").
 *
 *   const api = client('http://127.0.0.1:3000', token)
 *   const { data, error, status } = await api.api.organizations({ organization_id: id }).get()
 *   if (error?.status === 404) console.log(error.value.code)
 */
import { treaty } from '@elysiajs/eden'
import type { InferOutput } from 'valibot'
import type { App } from './app'
import type { ProblemBody } from './http/errors'

export function client(baseUrl: string, token: string) {
  const api = encodingPathValues(treaty<App>(baseUrl, { headers: { authorization: `Bearer ${token}` } }))
  // Only the types change: every answer keyward sends with an error status is a problem (ProblemAnswer).
  return api as unknown as WithProblems<typeof api>
}

/** Every error's body (`error.value` of a failed call): RFC 9457 with a stable `code`. */
export type Problem = InferOutput<typeof ProblemBody>

/**
 * A call's answer with its failure typed as keyward sends it: any error status with a problem body
 * (docs/api.md, "Status codes and errors"; the HTTP server's own bodiless 431, 400 and 505 aside,
 * which this client's well-formed requests meet only with headers over 16 KiB). Eden types a failure from the route's declared error schemas, and the
 * routes declare none (their problems are the app's, not each route's), so it was typed as Elysia's
 * 422 validation error, which keyward never sends: `error.status === 404` did not compile.
 */
type ProblemAnswer<Answer> =
  | Extract<Answer, { error: null }>
  | (Omit<Extract<Answer, { data: null }>, 'error'> & { error: { status: number; value: Problem } })

/**
 * The treaty with every request call's answer as `ProblemAnswer`. Eden's path steps are functions
 * that also carry the calls below them as properties: both are mapped.
 */
type WithProblems<Step> = Step extends (...args: infer Args) => Promise<infer Answer>
  ? (...args: Args) => Promise<ProblemAnswer<Answer>>
  : Step extends (...args: infer Args) => infer Next
    ? ((...args: Args) => WithProblems<Next>) & { [Key in keyof Step]: WithProblems<Step[Key]> }
    : Step extends object
      ? { [Key in keyof Step]: WithProblems<Step[Key]> }
      : Step

/** The calls that send a request; any other call of the client names a path parameter. */
const REQUEST_METHODS = new Set(['get', 'post', 'put', 'patch', 'delete', 'head', 'options', 'subscribe'])

/**
 * The client, with the values of path parameters percent-encoded: Eden puts them into the path as
 * given, so an id such as `../organizations/<id>` (one a device sent, say) addressed another route
 * (review, 2026-11-30). Encoded, it is one path segment, which the server refuses as no identifier.
 * Eden's path steps are functions; what a request call returns (a promise) is passed on untouched.
 */
function encodingPathValues<T>(step: T, key = ''): T {
  if (typeof step !== 'function') return step
  return new Proxy(step, {
    get: (target, property) => encodingPathValues(Reflect.get(target, property), String(property)),
    apply: (target, self, args: unknown[]) => {
      const [parameters] = args
      const naming = !REQUEST_METHODS.has(key) && args.length === 1 && typeof parameters === 'object' && parameters !== null
      const sent = naming ? [Object.fromEntries(Object.entries(parameters).map(([name, value]) => [name, encodeURIComponent(String(value))]))] : args
      return encodingPathValues(Reflect.apply(target, self, sent))
    },
  }) as T
}

export type KeywardClient = ReturnType<typeof client>
