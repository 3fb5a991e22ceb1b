/**
 * Bearer tokens: `kw1.<claims>.<signature>`, claims base64url JSON, signature HMAC-SHA256 over
 * `kw1.<claims>` with the data dir's secret. Stateless, so `issue-token` can mint one while a
 * server runs on the same dir; the organization's existence and state are checked per request.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

export const ROLES = ['admin', 'application_admin', 'viewer'] as const
export type Role = (typeof ROLES)[number]

/** `administrator` is accepted as the same role as `admin` (CONTRACT section 2). */
export function parseRole(name: string): Role | null {
  const role = name === 'administrator' ? 'admin' : name
  return (ROLES as readonly string[]).includes(role) ? (role as Role) : null
}

export interface TokenClaims {
  /** Organization the token was issued to. */
  readonly org: string
  readonly role: Role
  /** Expiry, seconds since the epoch. */
  readonly exp: number
}

const PREFIX = 'kw1.'

/** Far longer than any token we mint (about 200 characters): a longer one is refused unread. */
export const MAX_TOKEN_LENGTH = 512

/**
 * A token's one spelling (CONTRACT section 9: any other byte sequence is 401): base64url claims and
 * the 43 characters of a base64url HMAC-SHA256, nothing before, between or after.
 */
const TOKEN_SHAPE = /^kw1\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]{43})$/

export function mintToken(secret: Buffer, claims: TokenClaims): string {
  // The nonce makes every token unique, even two minted in the same second for the same grant.
  const body = Buffer.from(JSON.stringify({ ...claims, nonce: randomBytes(9).toString('base64url') })).toString('base64url')
  return `${PREFIX}${body}.${sign(secret, body)}`
}

/** The claims of a well-formed, authentic, unexpired token; null for anything else. */
export function verifyToken(secret: Buffer, token: string, nowSeconds = Date.now() / 1000): TokenClaims | null {
  const claims = verifySignature(secret, token)
  return claims && claims.exp > nowSeconds ? claims : null
}

function verifySignature(secret: Buffer, token: string): TokenClaims | null {
  if (token.length > MAX_TOKEN_LENGTH) return null
  const match = TOKEN_SHAPE.exec(token)
  if (!match) return null
  const body = match[1]!
  const signature = match[2]!
  // The signature's text is compared, not the bytes it decodes to: base64url decoding forgives
  // padding, '+' and '/', and stray trailing bits, which would give one token many spellings.
  // The claims need no such care: the signature covers their exact text.
  if (!timingSafeEqual(Buffer.from(signature), Buffer.from(sign(secret, body)))) return null
  try {
    const claims = JSON.parse(Buffer.from(body, 'base64url').toString('utf8')) as Partial<TokenClaims>
    // Tokens carry the canonical role name: the `administrator` alias is resolved before minting.
    if (typeof claims.org !== 'string' || !ROLES.includes(claims.role as Role) || typeof claims.exp !== 'number') return null
    return { org: claims.org, role: claims.role as Role, exp: claims.exp }
  } catch {
    return null
  }
}

function sign(secret: Buffer, body: string): string {
  return createHmac('sha256', secret).update(PREFIX).update(body).digest('base64url')
}

/** What one cached token is counted at: its characters at 2 bytes each, and the entry and claims around them. */
const cacheEntryBytes = (token: string) => 2 * token.length + 160

/**
 * Verifies tokens with a cache of signature results, so a request costs one map lookup rather than
 * an HMAC. Only tokens whose signature checked out are kept (junk costs one HMAC and leaves nothing
 * behind), and the cache is bounded in bytes: past the budget the oldest entries go, one at a time
 * (they are verified again on their next use). Expiry is still checked on every use.
 */
export class TokenVerifier {
  /** Authentic tokens, oldest first. */
  private readonly cache = new Map<string, TokenClaims>()
  private bytes = 0

  constructor(
    private readonly secret: Buffer,
    private readonly maxCacheBytes = 4 * 1024 * 1024,
  ) {}

  verify(token: string): TokenClaims | null {
    let claims = this.cache.get(token)
    if (claims === undefined) {
      const verified = verifySignature(this.secret, token)
      if (verified === null) return null
      this.remember(token, verified)
      claims = verified
    }
    return claims.exp > Date.now() / 1000 ? claims : null
  }

  /** How many tokens, and how many counted bytes, the cache holds (docs/security.md). */
  get cached(): { readonly tokens: number; readonly bytes: number } {
    return { tokens: this.cache.size, bytes: this.bytes }
  }

  private remember(token: string, claims: TokenClaims): void {
    this.cache.set(token, claims)
    this.bytes += cacheEntryBytes(token)
    for (const oldest of this.cache.keys()) {
      if (this.bytes <= this.maxCacheBytes) break
      this.cache.delete(oldest)
      this.bytes -= cacheEntryBytes(oldest)
    }
  }
}

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 }

/** `45s`, `30m`, `12h`, `90d` → seconds; null if malformed or not positive. */
export function parseDuration(text: string): number | null {
  const match = /^(\d{1,9})([smhd])$/.exec(text)
  if (!match) return null
  const seconds = Number(match[1]) * UNIT_SECONDS[match[2]!]!
  return seconds > 0 ? seconds : null
}
