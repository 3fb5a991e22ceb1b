/**
 * Records of every table written through a real server's API, and everything the API shows read
 * back: the damage, verify and backup tests use them, and so does test/fixtures/make-fixture.ts
 * (which runs them against old builds: only API calls that every version answers alike).
 */
import { requestOk } from './fixtures'
import { api, httpCaller } from './server-process'
import { newClientKey } from './random'

/** Everything the API shows, records keyed by kind and id. */
export type Dump = Record<string, unknown>

export async function dump(url: string, token: string): Promise<Dump> {
  const get = (path: string) => requestOk(httpCaller(url, token), 'GET', path)
  const out: Dump = {}
  for (const o of (await get('/api/organizations')).organizations) out[`organization ${o.organization_id}`] = o
  for (const a of (await get('/api/applications')).applications) {
    out[`application ${a.application_id}`] = a
    out[`application environments ${a.application_id}`] = (await api(url, token, 'GET', `/api/environments/${a.application_id}`)).body.environments
  }
  for (const o of (await get('/api/organizations')).organizations) {
    const res = await api(url, token, 'GET', `/api/organizations/${o.organization_id}/environments`)
    if (res.status === 200) out[`organization environments ${o.organization_id}`] = [res.body.default, res.body.supported]
  }
  for (const c of (await get('/api/consumers?page=1&page_size=1000')).consumers) out[`consumer ${c.consumer_id}`] = c
  for (const i of (await get('/api/installations?page=1&page_size=1000')).installations) out[`installation ${i.installation_id}`] = i
  for (const e of (await get('/api/enrollments?page=1&page_size=1000')).enrollments) {
    out[`enrollment ${e.enrollment_id}`] = e
    out[`keysets ${e.enrollment_id}`] = (await get(`/api/enrollments/${e.enrollment_id}/keysets`)).keysets
  }
  return out
}

/** `dump` and the tokens and audit events too (of this version: older builds have neither). */
export async function dumpAll(url: string, token: string): Promise<Dump> {
  const out = await dump(url, token)
  const get = async (path: string) => (await api(url, token, 'GET', path)).body
  for (const t of (await get('/api/tokens?page=1&page_size=1000')).tokens) out[`token ${t.token_id}`] = t
  for (const e of (await get('/api/audit-events?page=1&page_size=1000')).audit_events) out[`audit event ${e.event_id}`] = e
  return out
}

/**
 * `count` customers, each with a partner, an application, a consumer, an installation, an enrollment
 * and two keysets, with changes to each (renamed, environments added, verified, suspended).
 */
export async function writeRecords(url: string, token: string, vendorId: string, round: number, count = 3): Promise<void> {
  const server = httpCaller(url, token)
  const call = (method: string, path: string, body?: unknown) => requestOk(server, method, path, body)
  for (let n = 0; n < count; n++) {
    const customer = (await call('POST', '/api/organizations', {
      description: `customer ${round}.${n}`,
      parent_id: vendorId,
      supported_environments: { default: 'prod', supported: 'prod,test,dev' },
    })).organization.organization_id
    await call('POST', '/api/organizations', { description: `partner ${round}.${n}`, parent_id: customer })
    await call('PATCH', `/api/organizations/${customer}`, { description: `customer ${round}.${n} renamed` })
    const app = (await call('POST', '/api/applications', { organization_id: customer, description: `app ${round}.${n}`, allowed_environments: 'prod,test' })).application.application_id
    await call('POST', `/api/environments/${app}`, { environment: 'dev' })
    await call('PATCH', `/api/organizations/${customer}/environments`, { environment: 'qa' })
    const consumer = crypto.randomUUID()
    const installation = crypto.randomUUID()
    await call('POST', '/api/consumers', { consumer_id: consumer, organization_id: customer })
    await call('POST', '/api/installations', { installation_id: installation, description: `phone ${round}.${n}`, organization_id: customer })
    await call('PATCH', `/api/installations/${installation}/verify`)
    const enrollment = crypto.randomUUID()
    await call('POST', '/api/enrollments', {
      enrollment_id: enrollment,
      consumer_id: consumer,
      installation_id: installation,
      application_id: app,
      environment: 'test',
      installation_description: 'ignored',
    })
    await call('POST', `/api/enrollments/${enrollment}/keysets`, { client_enclave_key: newClientKey() })
    await call('POST', `/api/enrollments/${enrollment}/keysets`, { client_enclave_key: newClientKey() })
    await call('PATCH', `/api/consumers/${consumer}/suspend`)
  }
}
