import type { Organization } from '../../storage/records'

/** A customer not enabled for virtual environments has exactly one, implicit (docs/api.md "Organization environments"). */
export const IMPLICIT_ENVIRONMENT = 'PRODUCTION'

export const supportedEnvironments = (customer: Organization): readonly string[] =>
  customer.environments?.supported ?? [IMPLICIT_ENVIRONMENT]

export const defaultEnvironment = (customer: Organization): string => customer.environments?.default ?? IMPLICIT_ENVIRONMENT
