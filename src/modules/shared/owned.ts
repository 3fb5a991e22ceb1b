/**
 * Consumers and installations belong to one customer and are created idempotently by their
 * caller-chosen id (docs/api.md "Consumers"): the same id in the same customer returns the existing
 * record unchanged; an id another customer owns is 409.
 */
import type { RecordOf } from '../../storage/records'
import type { Fresh, Tx } from '../../storage/storage'
import { conflict } from './errors'
import { recordEvent, type Actor } from './audit'

export interface Created<T> {
  readonly record: T
  /** False when the record already existed (answered 200 instead of 201). */
  readonly created: boolean
}

/** Records `consumer.create` or `installation.create` when it created the record (none for an existing one). */
export async function createOrFind<N extends 'consumers' | 'installations'>(tx: Tx, actor: Actor, table: N, record: Fresh<N>): Promise<Created<RecordOf<N>>> {
  const { record: stored, inserted } = await tx.insertIfAbsent(table, record)
  if (stored.organization_id !== record.organization_id) throw conflict('id_owned_by_another_customer', 'This id belongs to another customer.')
  if (inserted) {
    const [action, target] = table === 'consumers' ? (['consumer.create', (stored as RecordOf<'consumers'>).consumer_id] as const) : (['installation.create', (stored as RecordOf<'installations'>).installation_id] as const)
    recordEvent(tx, actor, action, { target, customerId: stored.organization_id, before: null, after: stored })
  }
  return { record: stored, created: inserted }
}
