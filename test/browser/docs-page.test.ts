/**
 * GET /docs in a real browser (Debian's chromium, driven by playwright-core): the page renders the
 * document's operations with every request to another host blocked, so it works offline, as on an
 * on-prem machine. CI sets KEYWARD_REQUIRE_BROWSER=1 (.ci/run installs chromium), where a missing
 * browser fails the test; elsewhere it is skipped with one line.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext } from 'playwright-core'
import { createHarness, type Harness } from '../support/harness'

const CHROMIUM = '/usr/bin/chromium'
const required = process.env.KEYWARD_REQUIRE_BROWSER === '1'
const available = existsSync(CHROMIUM)
if (!available && !required) console.log(`docs page browser test skipped: no ${CHROMIUM} (apt-get install chromium)`)

let h: Harness
let server: { stop(force: boolean): unknown; port?: number } | undefined
let context: BrowserContext | undefined
let profile: string | undefined

beforeAll(async () => {
  if (!available) return
  h = await createHarness()
  h.app.listen({ hostname: '127.0.0.1', port: 0 })
  server = h.app.server!
  profile = mkdtempSync(join(tmpdir(), 'keyward-chromium-'))
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  })
})

afterAll(async () => {
  await context?.close()
  await server?.stop(true)
  await h?.close()
  if (profile) rmSync(profile, { recursive: true, force: true })
})

test.skipIf(!available && !required)('the docs page lists the operations with every other host blocked', async () => {
  expect(available).toBe(true) // reached without a browser only where one is required
  const origin = `http://127.0.0.1:${server!.port}`
  const blocked: string[] = []
  await context!.route('**/*', (route) => {
    const url = route.request().url()
    if (url.startsWith(`${origin}/`)) return route.continue()
    blocked.push(url)
    return route.abort('internetdisconnected')
  })
  const page = await context!.newPage()
  const errors: string[] = []
  page.on('pageerror', (error) => errors.push(error.message))
  const response = await page.goto(`${origin}/docs`)
  expect(response!.status()).toBe(200)
  // Operation summaries from the document, one per tag, rendered by the embedded renderer.
  for (const summary of ['List the organizations in scope', 'Register an application of a customer', 'List consumers', 'Enroll (or return the existing enrollment)']) {
    await page.getByText(summary, { exact: true }).first().waitFor({ state: 'attached', timeout: 10_000 })
  }
  expect(await page.title()).toBe('keyward API')
  expect(errors).toEqual([])
  // Whatever the renderer tried elsewhere was refused, and the page rendered all the same.
  if (blocked.length > 0) console.log(`docs page: ${blocked.length} request(s) to other hosts blocked: ${[...new Set(blocked.map((u) => new URL(u).host))].join(', ')}`)
}, 30_000)
