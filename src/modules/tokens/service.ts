/**
 * Tokens (docs/api.md "Tokens"; README "Tokens"): issued, listed and revoked by the API, by `init`
 * and by the CLI (directly, or through a running server's control socket), all through here. No HTTP.
 */
import type { Organization, Role, Token } from '../../storage/records'
import { then, type Condition, type FieldCondition, type Maybe, type Page, type Storage, type Tx } from '../../storage/storage'
import type { Slice } from '../../ops/turns'
import type { Principal } from '../shared/principal'
import { conflict } from '../shared/errors'
import { newToken, type NewToken } from '../../auth/tokens'
import { changeBy, customerIdOf, recordEvent, type Actor } from '../shared/audit'
import { pageOf, readableOrganizations, scopedConditions } from '../shared/scope'
import { TOKEN_STATES, type TokenListInput } from './model'

export interface TokenGrant {
  readonly organization: Organization
  readonly role: Role
  readonly ttlSeconds: number
  readonly description: string | null
}

export interface IssuedToken {
  readonly record: Token
  /** The token string: shown once, here, and never stored. */
  readonly token: string
}

export class TokenService {
  constructor(private readonly storage: Storage) {}

  /** `made`: the token, when its maker keeps the secret (the CLI); else one is made here. */
  issue(grant: TokenGrant, actor: Actor, made?: Pick<NewToken, 'tokenId' | 'tokenHash'>): Promise<IssuedToken> {
    return changeBy(actor, this.storage, (tx) => createToken(tx, grant, actor, made ? { ...made, token: '' } : newToken()))
  }

  /** Takes effect on the next request made with it (the record is read on every request). */
  revoke(token: Token, actor: Actor): Promise<Token> {
    const id = token.token_id
    return changeBy(actor, this.storage, async (tx) => {
      const current = (await tx.find('tokens', id, 'update'))!
      if (current.state === 'revoked') throw conflict('already_revoked', 'The token is already revoked.')
      const changed = await tx.update('tokens', id, { state: 'revoked' })
      const organization = (await tx.find('organizations', changed.organization_id))!
      recordEvent(tx, actor, 'token.revoke', { target: id, customerId: customerIdOf(organization), before: current, after: changed })
      return changed
    })
  }

  /**
   * In creation order, within the caller's scope. `now` (microseconds) decides which active tokens
   * are `expired`; the answer's views are made with the same reading.
   */
  list(p: Principal, q: TokenListInput, now: number, slice?: Slice): Maybe<Page<Token>> {
    return then(this.scopedOrganizations(p, q.organization_ids), (where) =>
      this.storage.list({ table: 'tokens', where: [...where, ...stateConditions(q.state, now)], page: pageOf(q), order: q.order, slice }),
    )
  }

  /** Every token, or an organization's, in creation order (`keyward tokens list`, which holds the data). */
  listAll(organizationId: string | null): Maybe<readonly Token[]> {
    const where = organizationId === null ? [] : [{ field: 'organization_id' as const, in: [organizationId] }]
    return then(this.storage.list({ table: 'tokens', where, order: 'asc' }), (page) => page.items)
  }

  /** The organization filter reduced to the organizations the caller reads; all of them when none was sent. */
  private scopedOrganizations(p: Principal, ids: readonly string[] | undefined): Maybe<Condition<'tokens'>[]> {
    if (ids?.length) return scopedConditions<'tokens'>(this.storage, p, [{ on: { field: 'organization_id' }, names: 'organizations', ids }])
    return then(readableOrganizations(this.storage, p), (readable) => (readable === null ? [] : [{ field: 'organization_id', in: readable }]))
  }
}

/**
 * Inside a transaction, so `init` can record the vendor's first token with the vendor itself.
 * `issued` is a new token's string and hash; made here unless given.
 */
export async function createToken(tx: Tx, grant: TokenGrant, actor: Actor, issued: NewToken = newToken()): Promise<IssuedToken> {
  const { tokenId, token, tokenHash } = issued
  // `expires` is `created` plus the ttl, to the microsecond: `created` is the transaction's time.
  const created = await tx.time()
  const record = await tx.insert('tokens', {
    token_id: tokenId,
    organization_id: grant.organization.organization_id,
    role: grant.role,
    description: grant.description,
    state: 'active',
    expires: created + grant.ttlSeconds * 1_000_000,
    token_hash: tokenHash,
  })
  recordEvent(tx, actor, 'token.create', { target: tokenId, customerId: customerIdOf(grant.organization), before: null, after: record })
  return { record, token }
}

/**
 * The states asked for (alternatives) as conditions. `expired` is derived: an active record whose
 * `expires` has passed; so `revoked` with `active` or with `expired` is one of two conditions.
 */
function stateConditions(states: TokenListInput['state'], now: number): Condition<'tokens'>[] {
  const wanted = new Set(states ?? [])
  if (wanted.size === 0 || wanted.size === TOKEN_STATES.length) return []
  const active: FieldCondition<'tokens'> = { field: 'state', in: ['active'] }
  const alternatives: FieldCondition<'tokens'>[][] = []
  if (wanted.has('active') && wanted.has('expired')) alternatives.push([active])
  else if (wanted.has('active')) alternatives.push([active, { field: 'expires', from: now + 1 }])
  else if (wanted.has('expired')) alternatives.push([active, { field: 'expires', until: now }])
  if (wanted.has('revoked')) alternatives.push([{ field: 'state', in: ['revoked'] }])
  return alternatives.length === 1 ? alternatives[0]! : [{ anyOf: alternatives }]
}
