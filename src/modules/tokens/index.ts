import { Elysia } from 'elysia'
import { actorOf, authenticated, listAnswer, pagingFields, readRoutes, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, findToken, tokenOrganization } from '../../http/access'
import { may } from '../shared/scope'
import { sliceOf, type Principal } from '../shared/principal'
import { ignoreBody, parseBody, parseQuery } from '../../http/body'
import { doc } from '../../http/openapi'
import { then } from '../../storage/storage'
import type { TokenService } from './service'
import { CreateTokenBody, IssuedTokenAnswer, TokenAnswer, TokenListAnswer, TokenListQuery, tokenViewAt } from './model'
import { viewText } from '../shared/model'


export const tokensController = (deps: AppDeps, service: TokenService) => {
  const { storage } = deps
  const read = readRoutes(deps)
  /** In scope (404), then the role (403), as everywhere. */
  const find = (principal: Principal, id: string) =>
    then(findToken(storage, principal, id), (token) => (authorize(may.manageTokens(principal), 'read or change tokens'), token))

  return new Elysia({ prefix: '/api/tokens' })
    .use(authenticated(deps))
    .get(
      '',
      read(({ principal, request }) => {
        authorize(may.manageTokens(principal), 'read or change tokens')
        const q = parseQuery(TokenListQuery, request)
        const slice = sliceOf(principal)
        // One clock reading for the state filter and every view: a token that expires meanwhile is
        // answered in the state it was chosen for. Views are made anew per read (not remembered):
        // `expired` changes with time alone.
        const now = storage.now()
        const tokenText = viewText(tokenViewAt(now))
        return then(service.list(principal, q, now, slice), ({ items, total }) =>
          listAnswer('tokens', items, tokenText, pagingFields(q, total), slice))
      }),
      { detail: doc({ operationId: 'listTokens', summary: 'List tokens', tag: 'tokens', query: TokenListQuery, responses: { 200: TokenListAnswer }, errors: [403] }) },
    )
    .get(
      '/:token_id',
      read(({ principal, params, set }) => then(find(principal, params.token_id!), (token) => ({ token: tokenViewAt(storage.now())(token), trace_id: traceIdOf(set) }))),
      { detail: doc({ operationId: 'getToken', summary: 'View a token', tag: 'tokens', responses: { 200: TokenAnswer }, errors: [403] }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        const named = await tokenOrganization(storage, principal, body)
        authorize(may.manageTokens(principal), 'issue tokens')
        const input = parseBody(CreateTokenBody, body)
        // A body that passed validation names a well-formed UUID, which tokenOrganization found above.
        const organization = named!
        const issued = await service.issue({ organization, role: input.role, ttlSeconds: input.ttl, description: input.description }, actorOf(principal, set))
        set.status = 201
        // The answer holds the token itself, shown this once: no cache may keep it.
        set.headers['cache-control'] = 'no-store'
        return { token: tokenViewAt(storage.now())(issued.record), secret: issued.token, trace_id: traceIdOf(set) }
      },
      {
        ...takesBody,
        detail: doc({
          operationId: 'createToken',
          summary: 'Issue a token (the token string is shown this once)',
          tag: 'tokens',
          body: CreateTokenBody,
          responses: { 201: IssuedTokenAnswer },
          shownOnce: true,
          errors: [403, 404],
        }),
      },
    )
    .patch(
      '/:token_id/revoke',
      async ({ principal, params, body, set }) => {
        const token = await find(principal, params.token_id)
        ignoreBody(body)
        return { token: tokenViewAt(storage.now())(await service.revoke(token, actorOf(principal, set))), trace_id: traceIdOf(set) }
      },
      {
        ...takesBody,
        detail: doc({
          operationId: 'revokeToken',
          summary: 'Revoke a token (401 from its next request on)',
          tag: 'tokens',
          responses: { 200: TokenAnswer },
          errors: [403, 409],
        }),
      },
    )
}
