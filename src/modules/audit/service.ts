/** The audit trail's query (docs/api.md "Audit events"). Events are written by the services (shared/audit.ts). */
import type { AuditEvent } from '../../storage/records'
import { then, type Condition, type Maybe, type Page, type Storage } from '../../storage/storage'
import type { Slice } from '../../ops/turns'
import type { Principal } from '../shared/principal'
import { pageOf, scopedConditions } from '../shared/scope'
import type { AuditEventListInput } from './model'

export class AuditService {
  constructor(private readonly storage: Storage) {}

  /**
   * The vendor's callers read every event; a customer's, those whose customer_id is itself. The
   * customer filter is reduced to that scope first (shared/scope.ts). Targets and actor tokens are
   * not: a customer's filter on them, or on actions, is answered from its own events alone (its
   * (customer_id, target_id) and (customer_id, actor_token_id) lists, or its customer list walked,
   * in the embedded store; the matching (customer_id, ...) indexes in PostgreSQL: docs/storage.md),
   * so another tenant's record of the same id costs nothing, tells nothing and hides nothing.
   */
  list(p: Principal, q: AuditEventListInput, slice?: Slice): Maybe<Page<AuditEvent>> {
    const filters = scopedConditions<'audit_events'>(this.storage, p, [{ on: { field: 'customer_id' }, names: 'customers', ids: q.customer_ids }])
    return then(filters, (where) => {
      const conditions: Condition<'audit_events'>[] = [...where]
      if (p.customerId !== null && !q.customer_ids?.length) conditions.push({ field: 'customer_id', in: [p.customerId] })
      if (q.target_ids?.length) conditions.push({ field: 'target_id', in: q.target_ids })
      if (q.actor_token_ids?.length) conditions.push({ field: 'actor_token_id', in: q.actor_token_ids })
      if (q.actions?.length) conditions.push({ field: 'action', in: q.actions })
      if (q.since !== undefined || q.until !== undefined) {
        conditions.push({ field: 'created', ...(q.since !== undefined ? { from: q.since } : {}), ...(q.until !== undefined ? { until: q.until } : {}) })
      }
      return this.storage.list({ table: 'audit_events', where: conditions, page: pageOf(q), order: q.order, slice })
    })
  }
}
