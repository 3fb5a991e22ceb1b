import type { Organization } from '../../storage/records'
import { badRequest } from './errors'

/** A customer not enabled for virtual environments has exactly one, implicit (docs/api.md "Organization environments"). */
export const IMPLICIT_ENVIRONMENT = 'PRODUCTION'

export const supportedEnvironments = (customer: Organization): readonly string[] =>
  customer.environments?.supported ?? [IMPLICIT_ENVIRONMENT]

export const defaultEnvironment = (customer: Organization): string => customer.environments?.default ?? IMPLICIT_ENVIRONMENT

/**
 * 400 `unknown_environment` unless the customer supports each of `names` (an application's
 * environments are some of its customer's: docs/api.md "Application environments"); `field` is the
 * body field that named them.
 */
export function requireSupported(customer: Organization, names: readonly string[], field: string): void {
  const supported = supportedEnvironments(customer)
  const unknown = names.filter((name) => !supported.includes(name))
  if (unknown.length === 0) return
  throw badRequest('unknown_environment', `Not a supported environment of this customer: ${unknown.join(', ')}.`, [
    { path: `body.${field}`, message: 'Not a supported environment of the customer' },
  ])
}
