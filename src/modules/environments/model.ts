import * as v from 'valibot'
import type { Application } from '../../storage/records'
import { AnsweredEnvironmentList, AnsweredUuid, EnvironmentName, TraceId, formatEnvironments } from '../shared/model'

export const EnvironmentBody = v.object({ environment: EnvironmentName })

const environmentsFields = { application_id: AnsweredUuid, environments: AnsweredEnvironmentList, trace_id: TraceId }
export const ApplicationEnvironmentsAnswer = v.strictObject(environmentsFields)
export const ApplicationEnvironmentsAddAnswer = v.strictObject({ ...environmentsFields, message: v.string() })

export const applicationEnvironments = (a: Application) => ({
  application_id: a.application_id,
  environments: formatEnvironments(a.environments),
})
