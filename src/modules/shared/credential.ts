/**
 * The rule a bearer token's credential must meet to act (docs/api.md "Authentication, roles and
 * scope"): the token active and not expired, its organization active, and a partner's customer
 * active. Judged when a request arrives (src/http/auth.ts), and again inside every change the
 * request makes (`changeBy`, audit.ts): a request whose body was still arriving when its token was
 * revoked or its organization suspended makes no change after that was acknowledged
 * (docs/security.md, "Revocation").
 */
import type { Credential } from '../../storage/storage'
import { unauthorized, type ApiError } from './errors'

export const invalidToken = () => unauthorized('The bearer token is invalid, expired or revoked.')

/** Why `credential` may not act at `now` (microseconds, the storage's clock); undefined when it may. */
export function refusalOf(credential: Credential, now: number): ApiError | undefined {
  const { token, organization, parent } = credential
  if (token.state !== 'active' || token.expires <= now || !organization) return invalidToken()
  if (organization.state !== 'active') return unauthorized('The organization of this token is suspended.')
  if (organization.organization_type === 'partner' && (!parent || parent.state !== 'active')) return unauthorized('The customer of this token is suspended.')
  return undefined
}
