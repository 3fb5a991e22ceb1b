/**
 * Who is calling: the bearer token's organization and role, checked against the live organization
 * records on every request (a suspended organization, or a partner of a suspended customer, is 401).
 */
import type { Organization } from '../storage/records'
import { then, type Maybe, type Reader } from '../storage/storage'
import { MAX_TOKEN_LENGTH, type Role, type TokenVerifier } from '../auth/tokens'
import { unauthorized } from './errors'

export interface Principal {
  readonly organization: Organization
  readonly role: Role
  /** The customer whose records the token reaches; null for the vendor, which reaches everything. */
  readonly customerId: string | null
}

// Scheme is case-insensitive (CONTRACT section 2); the token itself never contains whitespace.
const BEARER = /^bearer[ \t]+([^\s]+)[ \t]*$/i
/** Longer than any `Bearer <token>` can be (the scheme and blanks take far less than 64): refused unread. */
const MAX_AUTHORIZATION_LENGTH = MAX_TOKEN_LENGTH + 64

export function authenticate(reader: Reader, verifier: TokenVerifier, authorization: string | undefined): Maybe<Principal> {
  const token = authorization && authorization.length <= MAX_AUTHORIZATION_LENGTH ? BEARER.exec(authorization)?.[1] : undefined
  if (!token) throw unauthorized('Send an Authorization: Bearer <token> header.')
  const claims = verifier.verify(token)
  if (!claims) throw unauthorized('The bearer token is invalid or expired.')
  return then(reader.find('organizations', claims.org), (organization) => {
    if (!organization) throw unauthorized('The bearer token is invalid or expired.')
    if (organization.state !== 'active') throw unauthorized('The organization of this token is suspended.')
    if (organization.organization_type !== 'partner') {
      return { organization, role: claims.role, customerId: organization.organization_type === 'customer' ? organization.organization_id : null }
    }
    return then(reader.find('organizations', organization.parent_id!), (customer) => {
      if (!customer || customer.state !== 'active') throw unauthorized('The customer of this token is suspended.')
      return { organization, role: claims.role, customerId: customer.organization_id }
    })
  })
}
