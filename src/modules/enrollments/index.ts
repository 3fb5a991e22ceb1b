import { Elysia } from 'elysia'
import { actorOf, authenticated, listAnswer, readRoutes, recordAnswer, takesBody, traceIdOf, type AppDeps, pagingFields } from '../../http/context'
import { authorize, findOwnedById, findOwnedWithParent, findOwnedWithParentById, namedRecordFirst, referencedId } from '../../http/access'
import { may } from '../shared/scope'
import { sliceOf, type Principal } from '../shared/principal'
import { parseBody, parseQuery } from '../../http/body'
import { stateChange } from '../../http/state-change'
import { doc } from '../../http/openapi'
import type { Enrollment } from '../../storage/records'
import { then } from '../../storage/storage'
import { pageOf } from '../shared/scope'
import { DEFAULT_PAGE_SIZE } from '../shared/model'
import { requireActive, type EnrollmentService } from './service'
import { parseP256PublicKey } from './public-key'
import { CreateEnrollmentBody, CreateKeysetBody, EnrollmentAnswer, EnrollmentListAnswer, EnrollmentListQuery, KeysetListAnswer, KeysetListQuery, enrollmentText, enrollmentView, keysetText } from './model'

/** An enrollment's application: every request about an enrollment reads both. */
const APPLICATION = { field: 'application_id', table: 'applications' } as const
/** An application's customer: an enrollment is created in it. */
const CUSTOMER = { field: 'organization_id', table: 'organizations' } as const

export const enrollmentsController = (deps: AppDeps, service: EnrollmentService) => {
  const { storage } = deps
  const read = readRoutes(deps)
  const findApplication = (principal: Principal, id: string) => findOwnedById(storage, 'applications', principal, id, 'Application')
  /** An enrollment in scope whose application is active (docs/api.md "Status codes and errors": 401 otherwise), read together. */
  const find = (principal: Principal, id: string) =>
    then(findOwnedWithParent(storage, 'enrollments', principal, id, 'enrollment_id', 'Enrollment', APPLICATION), ({ record, parent }) => (requireActive(parent!), record))
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
      read(({ principal, request, set }) => {
        const q = parseQuery(EnrollmentListQuery, request)
        const slice = sliceOf(principal)
        return then(service.list(principal, q, slice), ({ items, total }) =>
          listAnswer('enrollments', items, enrollmentText, pagingFields(q, total), slice))
      }),
      { detail: doc({ operationId: 'listEnrollments', summary: 'List enrollments', tag: 'enrollments', query: EnrollmentListQuery, responses: { 200: EnrollmentListAnswer } }) },
    )
    .get(
      '/:enrollment_id',
      read(({ principal, params, set }) =>
        then(find(principal, params.enrollment_id!), (enrollment) => recordAnswer(set, 'enrollment', enrollmentText(enrollment)))),
      { detail: doc({ operationId: 'getEnrollment', summary: 'View an enrollment', tag: 'enrollments', responses: { 200: EnrollmentAnswer } }) },
    )
    .post(
      '',
      async ({ principal, body, set }) => {
        // The named application is judged first: unknown or out of scope 404, suspended 401, whatever
        // the role or the rest of the body (the order of docs/api.md "Status codes and errors"); read here only when those
        // checks fail, else once below with its customer.
        const named = referencedId(body, 'application_id')
        const input = await namedRecordFirst(
          () => (named === undefined ? undefined : then(findApplication(principal, named), requireActive)),
          () => {
            authorize(may.changeTenantData(principal), 'create enrollments')
            return parseBody(CreateEnrollmentBody, body)
          },
        )
        const { record: app, parent: customer } = await findOwnedWithParentById(storage, 'applications', principal, input.application_id, 'Application', CUSTOMER)
        const { record, created } = await service.create(app, customer!, input, actorOf(principal, set))
        set.status = created ? 201 : 200
        return { enrollment: enrollmentView(record), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'createEnrollment',
          summary: 'Enroll (or return the existing enrollment)',
          description:
            'Creates the consumer and the installation if missing. 201 with the new enrollment; 200 with the existing one when `enrollment_id` exists with the same four identifiers.',
          tag: 'enrollments',
          body: CreateEnrollmentBody,
          responses: { 201: EnrollmentAnswer, 200: EnrollmentAnswer },
          errors: [403, 404, 409],
        }) },
    )
    .patch(
      '/:enrollment_id/suspend',
      stateChange({ ...changeState, action: 'suspend enrollments', change: (enrollment, actor) => service.setState(enrollment, 'suspended', actor) }),
      { ...takesBody, detail: doc({ operationId: 'suspendEnrollment', summary: 'Suspend an enrollment', tag: 'enrollments', responses: { 200: EnrollmentAnswer }, errors: [403, 409] }) },
    )
    .patch(
      '/:enrollment_id/activate',
      stateChange({ ...changeState, action: 'activate enrollments', change: (enrollment, actor) => service.setState(enrollment, 'active', actor) }),
      { ...takesBody, detail: doc({ operationId: 'activateEnrollment', summary: 'Activate an enrollment', tag: 'enrollments', responses: { 200: EnrollmentAnswer }, errors: [403, 409] }) },
    )
    .get(
      '/:enrollment_id/keysets',
      read(({ principal, params, request, set }) =>
          then(find(principal, params.enrollment_id!), (enrollment) => {
            const q = parseQuery(KeysetListQuery, request)
            const slice = sliceOf(principal)
            // Like the installation list (docs/api.md "Keysets"): paged when `page` is sent; otherwise
            // every keyset (a bounded number), or the first `page_size` of them.
            const page = q.page !== undefined || q.page_size !== undefined ? pageOf({ page: q.page, page_size: q.page_size ?? DEFAULT_PAGE_SIZE }) : undefined
            return then(service.keysets(enrollment, page, q.order, slice), ({ items, total }) =>
              listAnswer('keysets', items, keysetText, {
                ...(q.page !== undefined ? { total, page: q.page, page_size: page!.size } : {}),
                trace_id: traceIdOf(set),
              }, slice))
          })),
      {
        detail: doc({
          operationId: 'listKeysets',
          summary: "List an enrollment's keysets",
          description:
            'Every keyset of the enrollment (at most 1,000) and a `trace_id`; with `page_size` alone, at most `page_size` of them. ' +
            'Paged shape (`total`, `page`, `page_size`, which is 100 unless sent) when `page` is sent.',
          tag: 'keysets',
          query: KeysetListQuery,
          responses: { 200: KeysetListAnswer },
        }),
      },
    )
    .post(
      '/:enrollment_id/keysets',
      async ({ principal, params, body, set }) => {
        const enrollment = await find(principal, params.enrollment_id)
        authorize(may.changeTenantData(principal), 'create keysets')
        const { client_enclave_key } = parseBody(CreateKeysetBody, body)
        const key = await parseP256PublicKey(client_enclave_key)
        // The enrollment may have changed while the key was checked: the service re-reads it.
        const updated = await service.addKeyset(enrollment, key, actorOf(principal, set))
        set.status = 201
        return { enrollment: enrollmentView(updated), trace_id: traceIdOf(set) }
      },
      { ...takesBody, detail: doc({
          operationId: 'createKeyset',
          summary: 'Create a keyset (retires the previous one)',
          tag: 'keysets',
          body: CreateKeysetBody,
          responses: { 201: EnrollmentAnswer },
          errors: [403, 409],
        }) },
    )
}
