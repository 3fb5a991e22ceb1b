/**
 * Checks an answer against the app's own OpenAPI document (GET /openapi.json): the operation for its
 * method and path, its status among that operation's responses, its content type, and its JSON body
 * against that response's schema. test/support/harness.ts runs it on every answer, so every HTTP test
 * also tests the document. A request that names no operation (an unknown route) must be answered 404
 * with a problem body: the document cannot list routes that do not exist.
 */
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020'
import addFormats from 'ajv-formats'

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
}

type Document = { paths: Record<string, Record<string, { operationId: string; responses: Record<string, ResponseObject> }>> }
type ResponseObject = { $ref?: string; content?: Record<string, { schema?: unknown }> }

export type AnswerCheck = (method: string, url: string, answer: Answer) => void

const checkers = new Map<string, AnswerCheck>()

/** One checker per document text: its validators are compiled once, each on first use. */
export function answerChecker(documentText: string): AnswerCheck {
  let checker = checkers.get(documentText)
  if (!checker) checkers.set(documentText, (checker = compileChecker(JSON.parse(documentText) as Document)))
  return checker
}

function compileChecker(document: Document): AnswerCheck {
  // Not strict: the document is added whole so that its $refs resolve, OpenAPI keywords and all.
  const ajv = new Ajv2020({ strict: false, allErrors: true })
  addFormats(ajv)
  ajv.addSchema(document, 'openapi.json')
  const validators = new Map<string, ValidateFunction>()
  const validator = (pointer: string) => {
    let validate = validators.get(pointer)
    if (!validate) validators.set(pointer, (validate = ajv.compile({ $ref: `openapi.json#${pointer}` })))
    return validate
  }
  const routes = Object.keys(document.paths).map((template) => ({
    template,
    pattern: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`),
  }))

  return (method, url, answer) => {
    const path = new URL(url, 'http://localhost').pathname
    const template = routes.find((route) => route.pattern.test(path))?.template
    const operation = template ? document.paths[template]![method.toLowerCase()] : undefined
    const what = `${method} ${path} answered ${answer.status}`
    let pointer: string
    if (!operation) {
      // An unknown /api path is charged to the client's address like any /api request (429 over it).
      if (answer.status !== 404 && answer.status !== 429) throw new Error(`${what}, but the document has no such operation (an unknown route must be 404)`)
      pointer = answer.status === 404 ? '/components/responses/NotFound' : '/components/responses/TooManyRequests'
    } else {
      const listed = operation.responses[String(answer.status)]
      if (!listed) throw new Error(`${what}, a status the document does not list for ${operation.operationId}`)
      pointer = listed.$ref ? listed.$ref.slice(1) : `/paths/${escape(template!)}/${method.toLowerCase()}/responses/${answer.status}`
    }
    const responseObject = at(document, pointer) as ResponseObject
    if (method === 'HEAD') return
    const mediaType = (answer.headers.get('content-type') ?? '').split(';')[0]!.trim()
    const content = responseObject.content?.[mediaType]
    if (!content) throw new Error(`${what} with content type ${mediaType || '(none)'}, which the document does not list`)
    if (!mediaType.endsWith('json')) return
    const validate = validator(`${pointer}/content/${escape(mediaType)}/schema`)
    if (!validate(answer.body)) {
      throw new Error(`${what}, a body that does not fit the document: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(answer.body)}`)
    }
  }
}

/** The value at a JSON Pointer (`/a/b~1c`). */
const at = (root: unknown, pointer: string) =>
  pointer
    .split('/')
    .slice(1)
    .reduce((node, segment) => (node as Record<string, unknown>)[segment.replaceAll('~1', '/').replaceAll('~0', '~')], root)

/** A JSON Pointer segment. */
const escape = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1')
