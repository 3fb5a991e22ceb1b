/**
 * The exported Eden client (`keyward/client`, src/client.ts) against a served app: typed calls on
 * every kind of route, answers and errors as the server gives them.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { client, type KeywardClient, type Problem } from 'keyward/client'
import { createHarness, type Harness } from '../support/harness'

let h: Harness
let api: KeywardClient
beforeAll(async () => {
  h = await createHarness()
  h.app.listen({ hostname: '127.0.0.1', port: 0 })
  api = client(`http://127.0.0.1:${h.app.server!.port}`, h.vendorToken)
})
afterAll(async () => {
  await h.app.server?.stop(true)
  await h.close()
})

test('create, read, list and change records with typed answers', async () => {
  const created = await api.api.organizations.post({ description: 'Acme', parent_id: h.vendorId })
  expect(created.status).toBe(201)
  const customer = created.data!.organization
  expect(customer.organization_type).toBe('customer')
  // The answers are typed from the app (npm run typecheck fails if they ever become `any`).
  // @ts-expect-error: no such field in an organization
  expect(customer.no_such_field).toBeUndefined()

  const viewed = await api.api.organizations({ organization_id: customer.organization_id }).get()
  expect(viewed.data!.organization.description).toBe('Acme')

  const consumerId = crypto.randomUUID()
  const consumer = await api.api.consumers.post({ consumer_id: consumerId, organization_id: customer.organization_id })
  expect(consumer.status).toBe(201)
  expect(consumer.data!.consumer.state).toBe('active')

  const listed = await api.api.consumers.get({ query: { consumer_ids: consumerId, page: '1' } })
  expect(listed.data!.consumers.map((c) => c.consumer_id)).toEqual([consumerId])
  expect(listed.data!.total).toBe(1)

  const suspended = await api.api.consumers({ consumer_id: consumerId }).suspend.patch()
  expect(suspended.data!.consumer.state).toBe('suspended')
})

test('errors arrive as the problem body with its status, typed so (no cast)', async () => {
  const missing = await api.api.consumers({ consumer_id: crypto.randomUUID() }).get()
  expect(missing.status).toBe(404)
  expect(missing.data).toBeNull()
  // npm run typecheck fails if a failure is typed as anything but a status and a problem (it was Elysia's 422).
  if (missing.error?.status !== 404) throw new Error(`expected a 404, got ${missing.status}`)
  const problem: Problem = missing.error.value
  expect(problem.code).toBe('not_found')
  expect(problem.status).toBe(404)
})

test("an organization's environments are typed with the id field each route answers", async () => {
  const customer = (await api.api.organizations.post({ description: 'Envs', parent_id: h.vendorId, supported_environments: { default: 'prod', supported: 'prod' } })).data!.organization
  const environments = api.api.organizations({ organization_id: customer.organization_id }).environments
  // Each id field is read without a cast: npm run typecheck fails if the answer's type loses it.
  const viewed = (await environments.get()).data!
  expect(viewed.organization_id).toBe(customer.organization_id)
  // The PATCH answers one of two shapes (add, or set the default), typed as their union.
  const added = (await environments.patch({ environment: 'test' })).data!
  expect('application_id' in added && added.application_id).toBe(customer.organization_id)
  expect(added.supported).toBe('PROD,TEST')
  const defaulted = (await environments.patch({ default: 'test' })).data!
  expect('organization_id' in defaulted && defaulted.organization_id).toBe(customer.organization_id)
  const removed = (await environments.delete({ environment: 'prod' })).data!
  expect(removed.application_id).toBe(customer.organization_id)
})

test("a path parameter is one path segment, whatever it holds: an id of '../organizations/<id>' reaches no other route", async () => {
  const customer = (await api.api.organizations.post({ description: 'Unchanged', parent_id: h.vendorId })).data!.organization
  const sneaky = await api.api.applications({ application_id: `../organizations/${customer.organization_id}` }).patch({ description: 'changed through the application route' })
  expect(sneaky.status).toBe(400)
  expect(sneaky.error!.value.code).toBe('invalid_identifier')
  expect((await api.api.organizations({ organization_id: customer.organization_id }).get()).data!.organization.description).toBe('Unchanged')
  expect((await api.api.organizations({ organization_id: `${customer.organization_id}/environments` }).get()).status).toBe(400)
})
