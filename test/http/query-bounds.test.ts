/**
 * A query's cost is bounded before work is spent on it (docs/security.md):
 * at most 200 parameters, counted before any is decoded and collected in one pass; per multi-value
 * filter at most 1,000 values as sent and 100 different ones, a value sent twice counting once; at
 * most 20 `errors` entries in a validation problem.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from 'bun:test'
import { MAX_FIELD_ERRORS, MAX_QUERY_PARAMETERS } from '../../src/http/body'
import { MAX_FILTER_VALUES, MAX_FILTER_VALUES_SENT } from '../../src/modules/shared/model'
import { ConsumerService } from '../../src/modules/consumers/service'
import { createHarness, type Harness } from '../support/harness'

let h: Harness
let customer: string
let partnerViewer: string
const LISTS = ['consumers', 'installations', 'enrollments'] as const

beforeAll(async () => {
  h = await createHarness()
  customer = await h.createCustomer()
  partnerViewer = h.token(await h.createPartner(customer), 'viewer')
})
afterAll(() => h.close())

const ids = (n: number) => Array.from({ length: n }, () => crypto.randomUUID())

describe('query parameters', () => {
  test('"&x" repeated 7,900 times (15.8 KB) from a partner viewer: 400 too_many_parameters on every list', async () => {
    for (const list of LISTS) {
      const res = await h.request('GET', `/api/${list}?${'&x'.repeat(7_900)}`, { token: partnerViewer })
      expect({ list, status: res.status, code: res.body.code }).toEqual({ list, status: 400, code: 'too_many_parameters' })
    }
  })

  test(`${MAX_QUERY_PARAMETERS} parameters are served, one more is refused`, async () => {
    const query = (n: number) => Array.from({ length: n }, (_, i) => `p${i}=1`).join('&')
    expect((await h.request('GET', `/api/consumers?${query(MAX_QUERY_PARAMETERS)}`, { token: partnerViewer })).status).toBe(200)
    const over = await h.request('GET', `/api/consumers?${query(MAX_QUERY_PARAMETERS + 1)}`, { token: partnerViewer })
    expect(over.status).toBe(400)
    expect(over.body.code).toBe('too_many_parameters')
    expect(over.body.detail).toContain(String(MAX_QUERY_PARAMETERS))
  })

  test('a repeated parameter keeps every value (and a parameter named __proto__ is just unknown)', async () => {
    const list = spyOn(ConsumerService.prototype, 'list')
    try {
      const sent = ids(MAX_FILTER_VALUES)
      const res = await h.request('GET', `/api/consumers?__proto__=1&${sent.map((id) => `consumer_ids=${id}`).join('&')}`)
      expect(res.status).toBe(200)
      expect(list.mock.calls[0]![1].consumer_ids).toEqual(sent)
    } finally {
      list.mockRestore()
    }
  })

  test("a parameter of one value sent twice, on every list of the OpenAPI document: a 400 that says so, not the validator's type names", async () => {
    const document = (await h.request('GET', '/openapi.json')).body
    const refused: string[] = []
    for (const [path, operations] of Object.entries<any>(document.paths)) {
      if (path.includes('{')) continue
      for (const parameter of operations.get?.parameters ?? []) {
        if (parameter.in !== 'query' || parameter.schema.type === 'array') continue
        const value = parameter.schema.enum?.[0] ?? (parameter.schema.type === 'integer' ? '1' : parameter.name === 'since' || parameter.name === 'until' ? '2026-01-01T00:00:00Z' : 'x')
        const res = await h.request('GET', `${path}?${parameter.name}=${value}&${parameter.name}=${value}`)
        expect({ path, name: parameter.name, status: res.status, detail: res.body.detail }).toEqual({ path, name: parameter.name, status: 400, detail: `query.${parameter.name}: ${parameter.name} must be given once` })
        refused.push(`${path} ${parameter.name}`)
      }
    }
    // Not vacuous: page and page_size of each paged list, the description search and the audit trail's times.
    expect(refused).toEqual(expect.arrayContaining(['/api/consumers page', '/api/consumers order', '/api/installations installation_description', '/api/installations installation_desc_search_mode', '/api/audit-events since', '/api/audit-events until', '/api/tokens page_size']))
  })
})

describe('multi-value filters', () => {
  test('a value sent many times counts once: the service is handed it once', async () => {
    const list = spyOn(ConsumerService.prototype, 'list')
    try {
      const [a] = ids(1) as [string]
      const repeated = Array(199).fill(`organization_ids=${a}`).join('&')
      const commas = `organization_ids=${[...Array(430).fill(a), a.toUpperCase()].join(',')}`
      for (const query of [repeated, commas]) {
        expect((await h.request('GET', `/api/consumers?${query}`, { token: partnerViewer })).status).toBe(200)
      }
      expect(list.mock.calls.map((call) => call[1].organization_ids)).toEqual([[a], [a]])
    } finally {
      list.mockRestore()
    }
  })

  test(`${MAX_FILTER_VALUES} different values are served, one more is a 400 naming the filter`, async () => {
    for (const list of LISTS) {
      const at = await h.request('GET', `/api/${list}?application_ids=${ids(MAX_FILTER_VALUES).join(',')}`, { token: partnerViewer })
      expect({ list, status: at.status }).toEqual({ list, status: 200 })
      const over = await h.request('GET', `/api/${list}?application_ids=${ids(MAX_FILTER_VALUES + 1).join(',')}`, { token: partnerViewer })
      expect({ list, status: over.status, code: over.body.code, errors: over.body.errors }).toEqual({
        list,
        status: 400,
        code: 'validation_failed',
        errors: [{ path: 'query.application_ids', message: `At most ${MAX_FILTER_VALUES} different values` }],
      })
    }
  })

  test('7,000 bad ids: one short 400, not one error per id', async () => {
    for (const bad of [Array.from({ length: 7_000 }, (_, i) => `x${i}`).join(','), 'x,'.repeat(7_000)]) {
      const res = await h.request('GET', `/api/consumers?organization_ids=${bad}`, { token: partnerViewer })
      expect(res.status).toBe(400)
      expect(res.body.errors).toEqual([{ path: 'query.organization_ids', message: `At most ${MAX_FILTER_VALUES_SENT} values` }])
      expect(JSON.stringify(res.body).length).toBeLessThan(1_000)
    }
  })

  test(`${MAX_FILTER_VALUES_SENT} values as sent (duplicates and blanks included) are served, one more is a 400`, async () => {
    const [a] = ids(1) as [string]
    const at = await h.request('GET', `/api/consumers?organization_ids=${[...Array(MAX_FILTER_VALUES_SENT - 100).fill(a), ...Array(100).fill('')].join(',')}`)
    expect(at.status).toBe(200)
    const over = await h.request('GET', `/api/consumers?organization_ids=${Array(MAX_FILTER_VALUES_SENT + 1).fill('').join(',')}`)
    expect(over.status).toBe(400)
    expect(over.body.errors).toEqual([{ path: 'query.organization_ids', message: `At most ${MAX_FILTER_VALUES_SENT} values` }])
  })
})

describe('validation problems', () => {
  test(`list at most ${MAX_FIELD_ERRORS} errors; the detail says how many more there are`, async () => {
    const bad = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(',')
    const res = await h.request('GET', `/api/consumers?consumer_ids=${bad(60, 'c')}&installation_ids=${bad(60, 'i')}&state=odd`)
    expect(res.status).toBe(400)
    expect(res.body.code).toBe('validation_failed')
    expect(res.body.errors).toHaveLength(MAX_FIELD_ERRORS)
    expect(res.body.errors[0]).toEqual({ path: 'query.consumer_ids.0', message: 'Invalid UUID' })
    expect(res.body.detail).toBe('query.consumer_ids.0: Invalid UUID (and 101 more problems, not listed)')
  })
})
