/**
 * GET /docs: the OpenAPI document rendered by Scalar's API reference, served entirely by keyward
 * (no CDN: on-prem machines are often offline). The `file` import makes `bun build --compile` embed
 * the renderer's self-contained browser bundle in the binary. @elysiajs/openapi renders the same
 * component, but loads it from a CDN and builds its own document, hence this page of our own.
 */
// Not an exported subpath of the package, so reached by its path; npm installs it exactly there.
import scalarBundle from '../../node_modules/@scalar/api-reference/dist/browser/standalone.js' with { type: 'file' }

export const DOCS_SCRIPT_PATH = '/docs/scalar.js'

// No default fonts (they come from Scalar's servers), no telemetry, no proxy for "try it" (calls go
// straight to this server), no AI agent or MCP links: nothing leaves the machine. Every tag open, so
// that the whole API can be read (and searched with the browser) at once.
const configuration = {
  url: '/openapi.json',
  withDefaultFonts: false,
  telemetry: false,
  proxyUrl: '',
  agent: { disabled: true },
  mcp: { disabled: true },
  showDeveloperTools: 'never',
  defaultOpenAllTags: true,
}

export const docsPage = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>keyward API</title>
  </head>
  <body>
    <div id="app"></div>
    <script src="${DOCS_SCRIPT_PATH}"></script>
    <script>Scalar.createApiReference('#app', ${JSON.stringify(configuration)})</script>
  </body>
</html>
`

/** The page as an answer, with its length (the request log reads it: src/http/observe.ts). */
export const docsPageResponse = () => new Response(docsPage, { headers: { 'content-type': 'text/html; charset=utf-8', 'content-length': String(Buffer.byteLength(docsPage)) } })

/** The renderer, from the binary (or node_modules when run from a checkout), with its length. */
export function docsScriptResponse(): Response {
  const file = Bun.file(scalarBundle)
  return new Response(file, { headers: { 'content-type': 'text/javascript; charset=utf-8', 'content-length': String(file.size) } })
}
