import * as v from 'valibot'
import type { AuditEvent } from '../../storage/records'
import { formatTimestamp } from '../../store/clock'
import { ROLES } from '../../auth/tokens'
import { AUDIT_ACTIONS, TARGET_TYPES } from '../shared/audit'
import { AnsweredUuid, documentedAs, multiValue, oneQueryValue, Timestamp, UuidList, pagedListFields, pagingQuery } from '../shared/model'

/**
 * A time in the API's own format (`2026-05-01 12:00:00.000000 +00:00`) or RFC 3339
 * (`2026-05-01T12:00:00Z`: any number of fraction digits or none, any offset, a leap second's `60`),
 * to microseconds. A `+` left unescaped in a query string arrives as a blank, so a blank where the
 * offset's sign goes is read as `+`. Anything else is refused.
 */
const API_TIME = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6}) ()([+ ])(00):(00)$/
// The same groups in both: date, time, fraction, Z, offset sign, hours, minutes.
const RFC_3339_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+ -])(\d{2}):(\d{2}))$/

/**
 * Microseconds, or null. A bound finer than a microsecond is rounded toward the inside of the range
 * it bounds: `since` up, `until` down (events are stamped in whole microseconds).
 */
export function parseTime(text: string, round: 'up' | 'down'): number | null {
  const m = API_TIME.exec(text) ?? RFC_3339_TIME.exec(text)
  if (!m) return null
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  // Second 60 is a leap second (RFC 3339): the same instant as the next minute's first, as in Unix time.
  // setUTCFullYear, not Date.UTC, which reads the years 0 to 99 as 1900 to 1999.
  const date = new Date(0)
  date.setUTCFullYear(year, month - 1, day)
  const millis = date.getTime() + ((hour * 60 + minute) * 60 + second) * 1000
  // Dates roll over (February 30th is March 2nd): only a date that reads back the same is real.
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day || hour > 23 || minute > 59 || second > 60) return null
  const offsetMinutes = m[8] ? 0 : (m[9] === '-' ? -1 : 1) * (Number(m[10]) * 60 + Number(m[11]))
  if (!m[8] && (Number(m[10]) > 23 || Number(m[11]) > 59)) return null
  const fraction = m[7] ?? ''
  let micros = Number(fraction.padEnd(6, '0').slice(0, 6))
  if (round === 'up' && /[1-9]/.test(fraction.slice(6))) micros++
  return (millis - offsetMinutes * 60_000) * 1000 + micros
}

/** The two forms for the OpenAPI document: the same patterns, without their groups' meaning. */
const TIME_FORM = {
  type: 'string',
  pattern: `${API_TIME.source}|${RFC_3339_TIME.source}`,
  description: 'A time: `2026-05-01 12:00:00.000000 +00:00` (the API\'s format) or RFC 3339, such as `2026-05-01T12:00:00Z` or `2026-05-01T14:00:00.5+02:00`. Both ends are included.',
}

const Time = (name: string, round: 'up' | 'down') =>
  v.optional(
    v.pipe(
      oneQueryValue(name),
      documentedAs(TIME_FORM),
      // Exactly the documented forms (TIME_FORM): no blanks around them, which the OpenAPI pattern refuses too.
      v.transform((text) => parseTime(text, round)),
      // Any time the two forms can write, 1970 or not: a bound before it simply matches every event (or none).
      v.number(`${name} must be a time like 2026-05-01 12:00:00.000000 +00:00 or 2026-05-01T12:00:00Z`),
    ),
  )

/** Actions of the audit trail, as every multi-value filter takes its values (and bounds them). */
const ActionList = multiValue(v.picklist(AUDIT_ACTIONS, 'actions must be actions of the audit trail, like consumer.create'), { type: 'string', enum: [...AUDIT_ACTIONS] })

export const AuditEventListQuery = v.object({
  target_ids: UuidList,
  actions: ActionList,
  actor_token_ids: UuidList,
  customer_ids: UuidList,
  /** Both ends included. */
  since: Time('since', 'up'),
  until: Time('until', 'down'),
  ...pagingQuery,
})
export type AuditEventListInput = v.InferOutput<typeof AuditEventListQuery>

/** An event of docs/api.md "Audit events". */
export const AuditEventRecord = v.strictObject({
  event_id: AnsweredUuid,
  time: v.pipe(Timestamp, v.description('When the change was made: the same instant as the changed record\'s `created` or `modified`.')),
  action: v.picklist(AUDIT_ACTIONS),
  actor: v.union([
    v.strictObject({ organization_id: AnsweredUuid, token_id: AnsweredUuid, role: v.picklist(ROLES) }),
    v.pipe(v.strictObject({ cli: v.string() }), v.description('A command of the CLI (`init`, `serve` on first start, `issue-token`, `tokens revoke`).')),
  ]),
  target: v.strictObject({ type: v.picklist(TARGET_TYPES), id: AnsweredUuid }),
  customer_id: v.pipe(v.nullable(AnsweredUuid), v.description('The customer whose data changed; null for the vendor\'s own organization.')),
  changes: v.pipe(
    v.record(v.string(), v.strictTuple([v.unknown(), v.unknown()])),
    v.description('Each changed field as [before, after]; a create has every stored field as [null, value]. Never a secret or its hash.'),
  ),
  trace_id: v.pipe(v.nullable(AnsweredUuid), v.description('The x-trace-id of the request that made the change; null for the CLI.')),
})
/** Like the consumer list: no trace_id (docs/api.md "Audit events"). */
export const AuditEventListAnswer = v.strictObject({ audit_events: v.array(AuditEventRecord), ...pagedListFields })

/** The stored event nested. */
export const auditEventView = (e: AuditEvent): v.InferOutput<typeof AuditEventRecord> => ({
  event_id: e.event_id,
  time: formatTimestamp(e.created),
  action: e.action as (typeof AUDIT_ACTIONS)[number],
  // A token's three fields are stored together (shared/audit.ts): all set, or all null and actor_cli set.
  actor: e.actor_cli !== null ? { cli: e.actor_cli } : { organization_id: e.actor_organization_id!, token_id: e.actor_token_id!, role: e.actor_role! },
  target: { type: e.target_type as (typeof TARGET_TYPES)[number], id: e.target_id },
  customer_id: e.customer_id,
  changes: e.changes as Record<string, [unknown, unknown]>,
  trace_id: e.trace_id,
})
