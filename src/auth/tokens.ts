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
  if (!token.startsWith(PREFIX)) return null
  const dot = token.indexOf('.', PREFIX.length)
  if (dot === -1) return null
  const body = token.slice(PREFIX.length, dot)
  const given = Buffer.from(token.slice(dot + 1), 'base64url')
  const expected = Buffer.from(sign(secret, body), 'base64url')
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
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

/**
 * Verifies tokens with a bounded cache of signature results, so a request costs one map lookup
 * rather than an HMAC. Expiry is still checked on every use.
 */
export class TokenVerifier {
  private readonly cache = new Map<string, TokenClaims | null>()

  constructor(
    private readonly secret: Buffer,
    private readonly maxEntries = 10_000,
  ) {}

  verify(token: string): TokenClaims | null {
    let claims = this.cache.get(token)
    if (claims === undefined) {
      claims = verifySignature(this.secret, token)
      if (this.cache.size >= this.maxEntries) this.cache.clear()
      this.cache.set(token, claims)
    }
    return claims && claims.exp > Date.now() / 1000 ? claims : null
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
