/**
 * Bearer tokens (docs/api.md "Tokens"; README "Tokens"): opaque strings, not signed statements.
 *
 *   kw2_<token_id as 32 hex digits>_<43 characters: base64url of 32 random bytes>
 *
 * The token's record (table `tokens`) holds only the SHA-256 of the whole string, which cannot be
 * used to authenticate. A request's string must match that pattern exactly (any other spelling is
 * 401 before anything is hashed); its record is found by the token_id it carries, the hash is
 * compared in constant time, and the record's state and expiry are checked on every request, so a
 * revocation is a 401 on the very next request.
 */
import { createHash, randomBytes } from 'node:crypto'
import type { Role, Token } from '../storage/records'

export type { Role }

export const ROLES = ['admin', 'application_admin', 'viewer'] as const satisfies readonly Role[]

/** `administrator` is accepted as the same role as `admin` (docs/api.md "Authentication, roles and scope"). */
export function parseRole(name: string): Role | null {
  const role = name === 'administrator' ? 'admin' : name
  return (ROLES as readonly string[]).includes(role) ? (role as Role) : null
}

export const DEFAULT_TOKEN_TTL = '90d'
/** docs/api.md "Tokens": a token lives at most 366 days. */
export const MAX_TOKEN_TTL_SECONDS = 366 * 86400

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 }

/** `45s`, `30m`, `12h`, `90d` → seconds; null if malformed or not positive. */
export function parseDuration(text: string): number | null {
  const match = /^(\d{1,9})([smhd])$/.exec(text)
  if (!match) return null
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2]!]!
  return seconds > 0 ? seconds : null
}

/**
 * What is wrong with a token's ttl, said after "ttl must be" (the API) or in the CLI's message; null
 * when it is one, which `parseDuration` then reads (at most MAX_TOKEN_TTL_SECONDS: eight digits of
 * seconds). A long run of digits is too long, not malformed; zero is its own mistake (docs/api.md "Tokens").
 */
export function ttlProblem(text: string): string | null {
  const match = /^(\d+)([smhd])$/.exec(text)
  if (!match) return 'a number and s, m, h or d, like 90d'
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2]!]!
  if (seconds === 0) return 'more than zero'
  if (seconds > MAX_TOKEN_TTL_SECONDS) return 'at most 366d'
  // Leading zeros past nine digits (`000000000090d`): parseDuration (and the OpenAPI pattern) take
  // at most nine, and a ttl passed here but unread made a token expired at its creation (review, 2026-11-30).
  return match[1]!.length > 9 ? 'a number of at most nine digits and s, m, h or d, like 90d' : null
}

/** The one spelling a token has; nothing else is ever hashed or looked up. */
export const TOKEN_SHAPE = /^kw2_([0-9a-f]{32})_[A-Za-z0-9_-]{43}$/
export const TOKEN_LENGTH = 80

export interface NewToken {
  readonly tokenId: string
  /** The token string: shown once, never stored. */
  readonly token: string
  readonly tokenHash: string
}

export function newToken(): NewToken {
  const tokenId = crypto.randomUUID()
  const token = `kw2_${tokenId.replaceAll('-', '')}_${randomBytes(32).toString('base64url')}`
  return { tokenId, token, tokenHash: hashToken(token) }
}

/** The token_id a well-formed token string carries; null for any other string. */
export function tokenIdOf(token: string): string | null {
  if (token.length !== TOKEN_LENGTH) return null
  const hex = TOKEN_SHAPE.exec(token)?.[1]
  return hex ? dashedTokenId(hex) : null
}

/** A token_id as the string carries it (32 hex digits), written as the UUID its record holds. */
export const dashedTokenId = (hex: string): string => `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

/** What one cached token is counted at: its characters, its hash's and its id's at 2 bytes each, and the entries around them. */
const cacheEntryBytes = (token: string) => 2 * (token.length + 64 + 36) + 96

/**
 * Checks a token string against its record's hash. Strings that verified are remembered with their
 * hash and token_id, so a busy token costs a map lookup instead of a SHA-256 and parsing its id; the
 * cache never answers for the record (state and expiry are the caller's, read every time), only for
 * what the string hashes to and the id it carries. Only strings that verified are kept (junk costs
 * at most one SHA-256 and leaves nothing behind), and the cache is bounded in bytes: past the budget
 * the oldest entries go, one at a time (they are hashed again on their next use).
 */
export class TokenVerifier {
  /** Verified token strings, oldest first. */
  private readonly cache = new Map<string, { readonly hash: string; readonly tokenId: string }>()
  private bytes = 0

  constructor(private readonly maxCacheBytes = 4 * 1024 * 1024) {}

  /** `tokenIdOf(token)`, from the cache for a token that verified. */
  tokenIdOf(token: string): string | null {
    return this.cache.get(token)?.tokenId ?? tokenIdOf(token)
  }

  verify(token: string, record: Token): boolean {
    const cached = this.cache.get(token)
    // The record's own hash string was remembered: the same string again is the same record's (or
    // an unchanged copy's), answered without comparing its characters.
    if (cached !== undefined) return cached.hash === record.token_hash || sameHash(cached.hash, record.token_hash)
    const hash = hashToken(token)
    if (!sameHash(hash, record.token_hash)) return false
    this.remember(token, record.token_hash, record.token_id)
    return true
  }

  /** How many tokens, and how many counted bytes, the cache holds (docs/security.md). */
  get cached(): { readonly tokens: number; readonly bytes: number } {
    return { tokens: this.cache.size, bytes: this.bytes }
  }

  private remember(token: string, hash: string, tokenId: string): void {
    this.cache.set(token, { hash, tokenId })
    this.bytes += cacheEntryBytes(token)
    for (const oldest of this.cache.keys()) {
      if (this.bytes <= this.maxCacheBytes) break
      this.cache.delete(oldest)
      this.bytes -= cacheEntryBytes(oldest)
    }
  }
}

/** Equal hex digests, compared in time that does not depend on where they differ. */
function sameHash(a: string, b: string): boolean {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i)
  return difference === 0
}
