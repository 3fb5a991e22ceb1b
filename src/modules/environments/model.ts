import * as v from 'valibot'
import type { Application } from '../../storage/records'
import { EnvironmentName, formatEnvironments } from '../shared/model'

export const EnvironmentBody = v.object({ environment: EnvironmentName })

export const applicationEnvironments = (a: Application) => ({
  application_id: a.application_id,
  environments: formatEnvironments(a.environments),
})
