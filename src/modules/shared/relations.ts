/**
 * List filters that reach through enrollments (consumers and installations filtered by the
 * applications, installations, consumers or enrollments they are enrolled with).
 */
import type { Enrollment, Tables } from '../../store/database'
import { relatedFilter, type Filter } from './list'

type Side = 'consumer' | 'installation'
type Through = 'consumer' | 'installation' | 'application' | 'enrollment'

const keyOf: Record<Through, (e: Enrollment) => string> = {
  consumer: (e) => e.consumer_id,
  installation: (e) => e.installation_id,
  application: (e) => e.application_id,
  enrollment: (e) => e.enrollment_id,
}

/** Records of `side` that have an enrollment whose `through` is one of `keys`. */
export function throughEnrollments<T>(tables: Tables, side: Side, idOf: (record: T) => string, through: Through, keys: readonly string[]): Filter<T> {
  const enrollments = tables.enrollments
  return relatedFilter<T, Enrollment>({
    via: enrollments,
    keys,
    lookup: through === 'enrollment' ? (id) => (enrollments.has(id) ? [id] : []) : (key) => enrollments.idsBy(through, key),
    target: keyOf[side],
    relatedOf: function* (record) {
      for (const id of enrollments.idsBy(side, idOf(record))) yield enrollments.get(id)!
    },
    keyOf: keyOf[through],
  })
}
