/**
 * Who is calling: the bearer token's record, found by the token_id the string carries and checked
 * against its hash, state and expiry on every request (README "Tokens"), then its organization,
 * checked against the live records too (a suspended organization, or a partner of a suspended
 * customer, is 401; activated again, its unrevoked tokens work again).
 */
import { then, type Maybe, type Reader } from '../storage/storage'
import { hashToken, TOKEN_LENGTH, type TokenVerifier } from '../auth/tokens'
import { unauthorized } from '../modules/shared/errors'
import { invalidToken as invalid, refusalOf } from '../modules/shared/credential'
import type { Principal } from '../modules/shared/principal'
import { customerIdOf } from '../modules/shared/audit'

/** The scheme, blanks and a token: anything longer is no token of ours, and is refused unread. */
const MAX_AUTHORIZATION_LENGTH = TOKEN_LENGTH + 32
// Scheme is case-insensitive (docs/api.md "Authentication, roles and scope"); the token itself never contains whitespace.
const BEARER = /^bearer[ \t]+([^\s]+)[ \t]*$/i

/** How clients send it: the pattern's one common spelling, taken without running it. */
const USUAL_SCHEME = 'Bearer '

/** The token of an Authorization header (BEARER's capture). */
function bearerToken(authorization: string | undefined): string | undefined {
  if (!authorization || authorization.length > MAX_AUTHORIZATION_LENGTH) return undefined
  // `Bearer <token>`: the same capture as the pattern's for any string without blanks after the
  // scheme; one with blanks there is no token of ours either way (TOKEN_SHAPE has none).
  if (authorization.length === USUAL_SCHEME.length + TOKEN_LENGTH && authorization.startsWith(USUAL_SCHEME)) return authorization.slice(USUAL_SCHEME.length)
  return BEARER.exec(authorization)?.[1]
}

export function authenticate(reader: Reader, verifier: TokenVerifier, authorization: string | undefined): Maybe<Principal> {
  const token = bearerToken(authorization)
  if (!token) {
    // Several headers arrive joined by commas, which no token holds: say which mistake it is.
    throw unauthorized(authorization?.includes(',') ? 'Send one Authorization: Bearer <token> header, not several.' : 'Send an Authorization: Bearer <token> header.')
  }
  const tokenId = verifier.tokenIdOf(token)
  if (!tokenId) throw invalid()
  const since = reader.mark()
  return then(reader.findCredential(tokenId), (credential) => {
    if (!credential) {
      // An unknown token id costs the hash a known one does: the time of a 401 does not tell whether a token id exists.
      hashToken(token)
      throw invalid()
    }
    if (!verifier.verify(token, credential.token)) throw invalid()
    const refusal = refusalOf(credential, reader.now())
    if (refusal) throw refusal
    // Present and active: `refusalOf` refuses a token without its organization.
    const organization = credential.organization!
    return { organization, role: credential.token.role, tokenId, since, customerId: customerIdOf(organization) }
  })
}
