/**
 * Consumers and installations belong to one customer and are created idempotently by their
 * caller-chosen id (CONTRACT section 6): the same id in the same customer returns the existing
 * record unchanged; an id another customer owns is 409.
 */
import { conflict } from '../../http/errors'

export interface Created<T> {
  readonly record: T
  /** False when the record already existed (answered 200 instead of 201). */
  readonly created: boolean
}

export function createOrFind<T extends { readonly organization_id: string }>(
  existing: T | undefined,
  customerId: string,
  create: () => T,
): Created<T> {
  if (!existing) return { record: create(), created: true }
  if (existing.organization_id !== customerId) throw conflict('id_owned_by_another_customer', 'This id belongs to another customer.')
  return { record: existing, created: false }
}
