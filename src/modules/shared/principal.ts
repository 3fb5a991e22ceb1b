/**
 * Who makes a request: the organization and role of its bearer token (src/http/auth.ts checks it),
 * and what the scope rules (scope.ts) and the audit trail need of it.
 */
import type { Organization, Role } from '../../storage/records'
import type { StateMark } from '../../storage/storage'
import { newSlice, type Slice } from '../../ops/turns'

export interface Principal {
  readonly organization: Organization
  readonly role: Role
  /** The customer whose records the token reaches; null for the vendor, which reaches everything. */
  readonly customerId: string | null
  /** The token's record id: the actor of the changes it makes, and in the request log. */
  readonly tokenId: string
  /**
   * The storage's mark taken before the token was read (`StateMark`): the request's answer and its
   * change rest on what it read from then on, the token and its organization first.
   */
  readonly since: StateMark
}

/**
 * A request's share of the event loop and of the list connections (`Slice`, src/ops/turns.ts),
 * for its page's walk and its answer: its long work waits in line as its tenant's, the customer whose
 * data the token reaches (the vendor's own organization for a vendor token), so that one tenant's
 * many big requests do not slow another's (docs/security.md, "Big answers").
 */
export const sliceOf = (p: Principal): Slice => newSlice(tenantOf(p))

/** The customer whose data the token reaches; the vendor's own organization for a vendor token. */
export const tenantOf = (p: Principal): string => p.customerId ?? p.organization.organization_id
