import type { Organization } from '../../storage/records'

/** A customer not enabled for virtual environments has exactly one, implicit (CONTRACT section 5). */
export const IMPLICIT_ENVIRONMENT = 'PRODUCTION'

export const supportedEnvironments = (customer: Organization): readonly string[] =>
  customer.environments?.supported ?? [IMPLICIT_ENVIRONMENT]

export const defaultEnvironment = (customer: Organization): string => customer.environments?.default ?? IMPLICIT_ENVIRONMENT
