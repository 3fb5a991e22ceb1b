import { Elysia } from 'elysia'
import { authenticated, settled, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, checkNamedOrganization, findOwned, may, owningCustomer } from '../../http/access'
import type { Principal } from '../../http/auth'
import { parseBody, parseQuery } from '../../http/body'
import { stateChange } from '../../http/state-change'
import type { Consumer } from '../../store/database'
import { doc } from '../../http/openapi'
import type { ConsumerService } from './service'
import { ConsumerListQuery, CreateConsumerBody, consumerView } from './model'

export const consumersController = (deps: AppDeps, service: ConsumerService) => {
  const { tables } = deps.store
  const find = (principal: Principal, id: string) => findOwned(tables.consumers, principal, id, 'consumer_id', 'Consumer')
  const changeState = { param: 'consumer_id', find, allowed: may.changeTenantData, answer: (consumer: Consumer) => ({ consumer: consumerView(consumer) }) }

  return new Elysia({ prefix: '/api/consumers' })
    .use(authenticated(deps))
    .get(
      '',
      ({ principal, request }) => {
        const q = parseQuery(ConsumerListQuery, request)
        const { items, total } = service.list(principal, q)
        // SPEC.md: this list carries no trace_id, and `page` only when it was sent.
        return settled(deps.store, { consumers: items.map(consumerView), total, ...(q.page ? { page: q.page } : {}), page_size: q.page_size })
      },
      { detail: doc({ summary: 'List consumers', tag: 'consumers', query: ConsumerListQuery }) },
    )
    .get(
      '/:consumer_id',
      ({ principal, params, set }) => settled(deps.store, { consumer: consumerView(find(principal, params.consumer_id)), trace_id: traceIdOf(set) }),
      { detail: doc({ summary: 'View a consumer', tag: 'consumers' }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        checkNamedOrganization(tables, principal, body)
        authorize(may.changeTenantData(principal), 'create consumers')
        const input = parseBody(CreateConsumerBody, body)
        const customer = owningCustomer(tables, principal, input.organization_id)
        const { record, created } = await service.create(customer, input.consumer_id)
        set.status = created ? 201 : 200
        return { consumer: consumerView(record), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: 'Create a consumer (or return the existing one)', tag: 'consumers', body: CreateConsumerBody, status: 201 }) },
    )
    .patch(
      '/:consumer_id/suspend',
      stateChange({ ...changeState, action: 'suspend consumers', change: (consumer) => service.setState(consumer, 'suspended') }),
      { ...takesBody, detail: doc({ summary: 'Suspend a consumer', tag: 'consumers' }) },
    )
    .patch(
      '/:consumer_id/activate',
      stateChange({ ...changeState, action: 'activate consumers', change: (consumer) => service.setState(consumer, 'active') }),
      { ...takesBody, detail: doc({ summary: 'Activate a consumer', tag: 'consumers' }) },
    )
}
