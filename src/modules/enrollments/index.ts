import { Elysia } from 'elysia'
import { authenticated, settled, takesBody, traceIdOf, type AppDeps } from '../../http/context'
import { authorize, findOwned, may, referencedId } from '../../http/access'
import type { Principal } from '../../http/auth'
import { badRequest, unauthorized } from '../../http/errors'
import { parseBody, parseQuery } from '../../http/body'
import { stateChange } from '../../http/state-change'
import { doc } from '../../http/openapi'
import type { Application, Enrollment } from '../../store/database'
import type { EnrollmentService } from './service'
import { parseP256PublicKey } from './public-key'
import { CreateEnrollmentBody, CreateKeysetBody, EnrollmentListQuery, enrollmentView, keysetView } from './model'

export const enrollmentsController = (deps: AppDeps, service: EnrollmentService) => {
  const { tables } = deps.store

  /** SPEC.md Errors: requests for an application its customer has deactivated are 401. */
  const requireActive = (app: Application) => {
    if (app.state !== 'active') throw unauthorized('The application of this enrollment is suspended.')
    return app
  }
  const find = (principal: Principal, id: string) => {
    const enrollment = findOwned(tables.enrollments, principal, id, 'enrollment_id', 'Enrollment')
    requireActive(tables.applications.get(enrollment.application_id)!)
    return enrollment
  }
  const changeState = {
    param: 'enrollment_id',
    find,
    allowed: may.changeTenantData,
    answer: (enrollment: Enrollment) => ({ enrollment: enrollmentView(enrollment) }),
  }

  return new Elysia({ prefix: '/api/enrollments' })
    .use(authenticated(deps))
    .get(
      '',
      ({ principal, request }) => {
        const q = parseQuery(EnrollmentListQuery, request)
        const { items, total } = service.list(principal, q)
        // Shaped like the consumer list (CONTRACT section 6): no trace_id, `page` only when sent.
        return settled(deps.store, { enrollments: items.map(enrollmentView), total, ...(q.page ? { page: q.page } : {}), page_size: q.page_size })
      },
      { detail: doc({ summary: 'List enrollments', tag: 'enrollments', query: EnrollmentListQuery }) },
    )
    .get(
      '/:enrollment_id',
      ({ principal, params, set }) =>
        settled(deps.store, { enrollment: enrollmentView(find(principal, params.enrollment_id)), trace_id: traceIdOf(set) }),
      { detail: doc({ summary: 'View an enrollment', tag: 'enrollments' }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        // The named application is judged first: unknown or out of scope 404, suspended 401, whatever
        // the role or the rest of the body (CONTRACT section 3's order).
        const named = referencedId(body, 'application_id')
        if (named !== undefined) requireActive(findOwned(tables.applications, principal, named, 'application_id', 'Application'))
        authorize(may.changeTenantData(principal), 'create enrollments')
        const input = parseBody(CreateEnrollmentBody, body)
        const app = requireActive(findOwned(tables.applications, principal, input.application_id, 'application_id', 'Application'))
        if (!app.environments.includes(input.environment)) {
          throw badRequest('unknown_environment', `The application has no environment ${input.environment}.`)
        }
        const customer = tables.organizations.get(app.organization_id)!
        const { record, created } = await service.create(app, customer, input)
        set.status = created ? 201 : 200
        return { enrollment: enrollmentView(record), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: 'Enroll (or return the existing enrollment)', tag: 'enrollments', body: CreateEnrollmentBody, status: 201 }) },
    )
    .patch(
      '/:enrollment_id/suspend',
      stateChange({ ...changeState, action: 'suspend enrollments', change: (enrollment) => service.setState(enrollment, 'suspended') }),
      { ...takesBody, detail: doc({ summary: 'Suspend an enrollment', tag: 'enrollments' }) },
    )
    .patch(
      '/:enrollment_id/activate',
      stateChange({ ...changeState, action: 'activate enrollments', change: (enrollment) => service.setState(enrollment, 'active') }),
      { ...takesBody, detail: doc({ summary: 'Activate an enrollment', tag: 'enrollments' }) },
    )
    .get(
      '/:enrollment_id/keysets',
      ({ principal, params, set }) =>
        settled(deps.store, { keysets: service.keysets(find(principal, params.enrollment_id)).map(keysetView), trace_id: traceIdOf(set) }),
      { detail: doc({ summary: "List an enrollment's keysets", tag: 'keysets' }) },
    )
    .post(
      '/:enrollment_id/keysets',
      async ({ principal, params, body, set }) => {
        const enrollment = find(principal, params.enrollment_id)
        authorize(may.changeTenantData(principal), 'create keysets')
        const { client_enclave_key } = parseBody(CreateKeysetBody, body)
        const key = await parseP256PublicKey(client_enclave_key)
        // The enrollment may have changed while the key was checked: the service re-reads it.
        const updated = await service.addKeyset(enrollment, key)
        set.status = 201
        return { enrollment: enrollmentView(updated), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({ summary: 'Create a keyset (retires the previous one)', tag: 'keysets', body: CreateKeysetBody, status: 201 }) },
    )
}
