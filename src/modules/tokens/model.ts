import * as v from 'valibot'
import type { Token } from '../../storage/records'
import { formatTimestamp } from '../../store/clock'
import { DEFAULT_TOKEN_TTL, parseDuration, parseRole, ROLES, TOKEN_SHAPE, ttlProblem } from '../../auth/tokens'
import { AnsweredUuid, Description, StateList, Timestamp, TraceId, Uuid, UuidList, pagedListFields, pagingQuery } from '../shared/model'

/** A token's lifetime, `45s` to `366d` (docs/api.md "Tokens"), in seconds. */
export const TokenTtl = v.pipe(
  v.string(),
  // What parseDuration takes (no lookahead for "not zero": RE2-based generators cannot compile one);
  // more than zero and at most 366d are the checks below.
  v.metadata({ pattern: '^[0-9]{1,9}[smhd]$', examples: ['90d'] }),
  v.description('Seconds, minutes, hours or days, like 45s, 30m, 12h or 90d; more than zero, at most 366d.'),
  v.check((text) => ttlProblem(text) === null, (issue) => `ttl must be ${ttlProblem(issue.input as string)}`),
  v.transform((text) => parseDuration(text)!),
)

/** One of the three roles; `administrator` is `admin` (docs/api.md "Authentication, roles and scope"). */
const RoleName = v.pipe(
  v.picklist([...ROLES, 'administrator'], `role must be one of ${ROLES.join(', ')}`),
  v.transform((name) => parseRole(name)!),
)

export const CreateTokenBody = v.object({
  organization_id: Uuid,
  role: RoleName,
  ttl: v.optional(TokenTtl, DEFAULT_TOKEN_TTL),
  description: v.optional(v.nullable(Description), null),
})

export const TOKEN_STATES = ['active', 'revoked', 'expired'] as const

export const TokenListQuery = v.object({
  organization_ids: UuidList,
  state: StateList(TOKEN_STATES),
  ...pagingQuery,
})
export type TokenListInput = v.InferOutput<typeof TokenListQuery>

/**
 * Revoked stays revoked; an active token past `expires` is answered `expired` (derived, not stored).
 * `now`: the storage's clock (`Reader.now`), which stamped `expires`.
 */
export const tokenState = (t: Token, now: number): (typeof TOKEN_STATES)[number] =>
  t.state === 'revoked' ? 'revoked' : t.expires <= now ? 'expired' : 'active'

/** A token record of docs/api.md "Tokens": never the hash. */
export const TokenRecord = v.strictObject({
  token_id: AnsweredUuid,
  organization_id: AnsweredUuid,
  role: v.picklist(ROLES),
  description: v.nullable(v.string()),
  state: v.pipe(v.picklist(TOKEN_STATES), v.description('`expired`: active, but past `expires`.')),
  created: Timestamp,
  expires: Timestamp,
})
export const TokenAnswer = v.strictObject({ token: TokenRecord, trace_id: TraceId })
export const IssuedTokenAnswer = v.strictObject({
  token: TokenRecord,
  secret: v.pipe(
    v.string(),
    v.regex(TOKEN_SHAPE),
    v.description('The token itself, for `Authorization: Bearer <secret>`: shown this once, stored only as a hash.'),
  ),
  trace_id: TraceId,
})
/** No trace_id in this list, like the consumer list (docs/api.md "Tokens"). */
export const TokenListAnswer = v.strictObject({ tokens: v.array(TokenRecord), ...pagedListFields })

/**
 * The view of a token as of `now` (microseconds), which decides `expired`: a list makes its views
 * with the one reading its state filter used. One argument only, so that `tokens.map(view)` cannot
 * pass an index as the time.
 */
export const tokenViewAt =
  (now: number) =>
  (t: Token): v.InferOutput<typeof TokenRecord> => ({
    token_id: t.token_id,
    organization_id: t.organization_id,
    role: t.role,
    description: t.description,
    state: tokenState(t, now),
    created: formatTimestamp(t.created),
    expires: formatTimestamp(t.expires),
  })

