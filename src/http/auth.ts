/**
 * Who is calling: the bearer token's organization and role, checked against the live organization
 * records on every request (a suspended organization, or a partner of a suspended customer, is 401).
 */
import type { Organization, Tables } from '../store/database'
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

export function authenticate(tables: Tables, verifier: TokenVerifier, authorization: string | undefined): Principal {
  const token = authorization && authorization.length <= MAX_AUTHORIZATION_LENGTH ? BEARER.exec(authorization)?.[1] : undefined
  if (!token) throw unauthorized('Send an Authorization: Bearer <token> header.')
  const claims = verifier.verify(token)
  if (!claims) throw unauthorized('The bearer token is invalid or expired.')
  const organization = tables.organizations.get(claims.org)
  if (!organization) throw unauthorized('The bearer token is invalid or expired.')
  if (organization.state !== 'active') throw unauthorized('The organization of this token is suspended.')
  let customerId: string | null = null
  if (organization.organization_type === 'customer') customerId = organization.organization_id
  if (organization.organization_type === 'partner') {
    const customer = organization.parent_id ? tables.organizations.get(organization.parent_id) : undefined
    if (!customer || customer.state !== 'active') throw unauthorized('The customer of this token is suspended.')
    customerId = customer.organization_id
  }
  return { organization, role: claims.role, customerId }
}

