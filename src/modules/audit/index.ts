import { Elysia } from 'elysia'
import { sliceOf } from '../shared/principal'
import { authenticated, listAnswer, readRoutes, type AppDeps, pagingFields } from '../../http/context'
import { authorize } from '../../http/access'
import { may } from '../shared/scope'
import { parseQuery } from '../../http/body'
import { doc } from '../../http/openapi'
import { then } from '../../storage/storage'
import type { AuditService } from './service'
import { AuditEventListAnswer, AuditEventListQuery, auditEventView } from './model'
import { viewText } from '../shared/model'

const auditEventText = viewText(auditEventView)

export const auditController = (deps: AppDeps, service: AuditService) => {
  const read = readRoutes(deps)
  return new Elysia({ prefix: '/api/audit-events' }).use(authenticated(deps)).get(
    '',
    read(({ principal, request }) => {
      authorize(may.readAuditEvents(principal), 'read the audit trail')
      const q = parseQuery(AuditEventListQuery, request)
      const slice = sliceOf(principal)
      return then(service.list(principal, q, slice), ({ items, total }) =>
        listAnswer('audit_events', items, auditEventText, pagingFields(q, total), slice))
    }),
    {
      detail: doc({
        operationId: 'listAuditEvents',
        summary: 'List audit events (oldest first unless order=desc)',
        tag: 'audit',
        query: AuditEventListQuery,
        responses: { 200: AuditEventListAnswer },
        errors: [403],
      }),
    },
  )
}
