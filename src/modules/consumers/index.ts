import { Elysia } from 'elysia'
import { actorOf, authenticated, listAnswer, readRoutes, recordAnswer, takesBody, traceIdOf, type AppDeps, pagingFields } from '../../http/context'
import { createBody, findOwned, owningCustomer } from '../../http/access'
import { may } from '../shared/scope'
import { sliceOf, type Principal } from '../shared/principal'
import { parseQuery } from '../../http/body'
import { stateChange } from '../../http/state-change'
import type { Consumer } from '../../storage/records'
import { then } from '../../storage/storage'
import { doc } from '../../http/openapi'
import type { ConsumerService } from './service'
import { ConsumerAnswer, ConsumerListAnswer, ConsumerListQuery, CreateConsumerBody, consumerText, consumerView } from './model'

export const consumersController = (deps: AppDeps, service: ConsumerService) => {
  const { storage } = deps
  const read = readRoutes(deps)
  const find = (principal: Principal, id: string) => findOwned(storage, 'consumers', principal, id, 'consumer_id', 'Consumer')
  const changeState = { param: 'consumer_id', find, allowed: may.changeTenantData, answer: (consumer: Consumer) => ({ consumer: consumerView(consumer) }) }

  return new Elysia({ prefix: '/api/consumers' })
    .use(authenticated(deps))
    .get(
      '',
      read(({ principal, request, set }) => {
        const q = parseQuery(ConsumerListQuery, request)
        const slice = sliceOf(principal)
        return then(service.list(principal, q, slice), ({ items, total }) =>
          listAnswer('consumers', items, consumerText, pagingFields(q, total), slice))
      }),
      { detail: doc({ operationId: 'listConsumers', summary: 'List consumers', tag: 'consumers', query: ConsumerListQuery, responses: { 200: ConsumerListAnswer } }) },
    )
    .get(
      '/:consumer_id',
      read(({ principal, params, set }) =>
        then(find(principal, params.consumer_id!), (consumer) => recordAnswer(set, 'consumer', consumerText(consumer)))),
      { detail: doc({ operationId: 'getConsumer', summary: 'View a consumer', tag: 'consumers', responses: { 200: ConsumerAnswer } }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        const input = await createBody(storage, principal, body, may.changeTenantData(principal), 'create consumers', CreateConsumerBody)
        const customer = await owningCustomer(storage, principal, input.organization_id)
        const { record, created } = await service.create(customer, input.consumer_id, actorOf(principal, set))
        set.status = created ? 201 : 200
        return { consumer: consumerView(record), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'createConsumer',
          summary: 'Create a consumer (or return the existing one)',
          description: '201 with the new consumer; 200 with the existing one, unchanged, when the caller\'s customer already has this id.',
          tag: 'consumers',
          body: CreateConsumerBody,
          responses: { 201: ConsumerAnswer, 200: ConsumerAnswer },
          errors: [403, 404, 409],
        }) },
    )
    .patch(
      '/:consumer_id/suspend',
      stateChange({ ...changeState, action: 'suspend consumers', change: (consumer, actor) => service.setState(consumer, 'suspended', actor) }),
      { ...takesBody, detail: doc({ operationId: 'suspendConsumer', summary: 'Suspend a consumer', tag: 'consumers', responses: { 200: ConsumerAnswer }, errors: [403, 409] }) },
    )
    .patch(
      '/:consumer_id/activate',
      stateChange({ ...changeState, action: 'activate consumers', change: (consumer, actor) => service.setState(consumer, 'active', actor) }),
      { ...takesBody, detail: doc({ operationId: 'activateConsumer', summary: 'Activate a consumer', tag: 'consumers', responses: { 200: ConsumerAnswer }, errors: [403, 409] }) },
    )
}
