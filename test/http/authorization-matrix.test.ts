/**
 * the role table of docs/api.md "Authentication, roles and scope", generated: the table is written down once below as data (action ×
 * caller column → a scope such as "its own", or 403/404), and every endpoint under each action is
 * called by every role of every organization type (the vendor; customer A and its partner AP;
 * customer B and its partner BP for the other tenant) against targets in scope and across tenants.
 * The expected status is derived from the table and the scope bullet above it (out of scope is 404
 * whatever the role, checked first), never written per cell; a denied call must change nothing (the
 * target read back by the vendor's admin, whole records compared), an allowed one must succeed (its
 * state is prepared so the change is not a no-op).
 *
 * Two rows come from later sections of docs/api.md, in the table's words: tokens ("Tokens") and
 * the audit trail ("Audit events"). The audit trail is a list: a record out of scope is not a 404 there
 * but simply not listed, so its calls are judged by what the answer lists.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { tokenIdOf, type Role } from '../../src/auth/tokens'
import { createHarness, type Harness } from '../support/harness'
import { p256PublicKey } from '../support/fixtures'

// ---------------------------------------------------------------------------------------------
// The table, as docs/api.md "Authentication, roles and scope" writes it.

const COLUMNS = [
  'vendor admin',
  'vendor application_admin',
  'customer admin',
  'customer application_admin',
  'partner admin or application_admin',
  'viewer (any organization)',
] as const
type Column = (typeof COLUMNS)[number]

/** Who a cell lets the caller act on; the words are the table's. */
type Scope =
  | 'all'
  | 'any'
  | 'any but the vendor'
  | 'any customer'
  | 'customer or partner'
  | 'a partner of itself'
  | 'itself'
  | 'itself and its partners'
  | 'its partners'
  | 'its own'
  | "its customer's"
type Cell = Scope | 403 | 404 | 'as its organization type reads'

const ACTIONS = [
  'read organizations in scope',
  'create an organization',
  'update description',
  'suspend, activate',
  'organization environments: view',
  'organization environments: change',
  'applications and their environments: create, change',
  'consumers, installations, enrollments, keysets: create, change',
  /** Not a row of the table: its scope bullet and "viewer (read-only: every GET in its scope)". */
  'read customer-owned records in scope',
  /** docs/api.md "Tokens": "only the admin role reads or changes tokens ... a vendor admin for any organization, a customer admin for itself and its partners, a partner admin for nobody". */
  'tokens: read, issue, revoke',
  /** docs/api.md "Audit events": "the admin and viewer roles of the vendor (every event) and of a customer (events whose customer_id is itself); others 403". */
  'audit events: read',
] as const
type Action = (typeof ACTIONS)[number]

const TABLE: Record<Action, readonly [Cell, Cell, Cell, Cell, Cell, Cell]> = {
  'read organizations in scope': ['all', 'all', 'itself and its partners', 'itself and its partners', 'itself', 'as its organization type reads'],
  'create an organization': ['customer or partner', 403, 'a partner of itself', 403, 403, 403],
  'update description': ['any', 403, 'itself and its partners', 403, 403, 403],
  'suspend, activate': ['any but the vendor', 403, 'its partners', 403, 403, 403],
  'organization environments: view': ['any customer', 'any customer', 'its own', 'its own', 404, 'as its organization type reads'],
  'organization environments: change': ['any customer', 403, 'its own', 403, 404, 403],
  'applications and their environments: create, change': ['any', 'any', 'its own', 'its own', 403, 403],
  'consumers, installations, enrollments, keysets: create, change': ['any', 'any', 'its own', 'its own', "its customer's", 403],
  'read customer-owned records in scope': ['any', 'any', 'its own', 'its own', "its customer's", 'as its organization type reads'],
  'tokens: read, issue, revoke': ['any', 403, 'itself and its partners', 403, 403, 403],
  'audit events: read': ['all', 403, 'its own', 403, 403, 'as its organization type reads'],
}

// ---------------------------------------------------------------------------------------------
// The organizations: the vendor V; customers A and B (enabled for virtual environments), each with
// a partner (AP, BP); AP2, a second partner of A (a partner's sibling); customer C, not enabled (its
// environment endpoints do not exist: 404).

type OrgName = 'V' | 'A' | 'AP' | 'AP2' | 'B' | 'BP' | 'C'
type Kind = 'vendor' | 'customer' | 'partner'
const KIND: Record<OrgName, Kind> = { V: 'vendor', A: 'customer', AP: 'partner', AP2: 'partner', B: 'customer', BP: 'partner', C: 'customer' }
const PARENT: Record<OrgName, OrgName | null> = { V: null, A: 'V', AP: 'A', AP2: 'A', B: 'V', BP: 'B', C: 'V' }
const ENVIRONMENTS_ENABLED: OrgName[] = ['A', 'B']
const customerOf = (org: OrgName): OrgName | null => (KIND[org] === 'partner' ? PARENT[org] : KIND[org] === 'customer' ? org : null)

interface Caller {
  readonly label: string
  readonly org: OrgName
  readonly role: Role
}

const CALLERS: Caller[] = (['V', 'A', 'AP', 'B', 'BP'] as const).flatMap((org) =>
  (['admin', 'application_admin', 'viewer'] as const).map((role) => ({ label: `${org} ${role}`, org, role })),
)

function column(c: Caller): Column {
  if (c.role === 'viewer') return 'viewer (any organization)'
  if (KIND[c.org] === 'partner') return 'partner admin or application_admin'
  return `${KIND[c.org] as 'vendor' | 'customer'} ${c.role}`
}

/** "as its organization type reads": the column of its type's readers. */
const readerColumn = (c: Caller): Column =>
  KIND[c.org] === 'partner' ? 'partner admin or application_admin' : `${KIND[c.org] as 'vendor' | 'customer'} admin`

/**
 * What a call is aimed at. `org`: an organization itself; `parent`: the parent_id of a new
 * organization ('omitted' when left out); `owned`: a record owned by customer `org` (for the audit
 * trail, 'V': the vendor's own); `named`: the `organization_id` a new application, consumer or
 * installation is for; `token`: a token of organization `org`, or the organization a new one is for.
 */
type Target = { readonly kind: 'org' | 'parent' | 'owned' | 'named' | 'token'; readonly org: OrgName | 'omitted' }

/**
 * The scope bullet: the vendor reaches everything; a customer itself, its partners and what it
 * owns; a partner itself and what its customer owns (which it may name as the owner of new records).
 */
function reaches(c: Caller, t: Target): boolean {
  if (KIND[c.org] === 'vendor') return true
  // A customer's parent_id is judged as part of the body (docs/api.md "Endpoints": another parent is 400,
  // known or not); a partner names its parent as it names the owner of a new record.
  if (t.kind === 'parent' && (KIND[c.org] === 'customer' || t.org === 'omitted')) return true
  const org = t.org as OrgName
  if (t.kind === 'owned') return customerOf(c.org) === org
  const readable = KIND[c.org] === 'customer' ? org === c.org || PARENT[org] === c.org : org === c.org
  return readable || ((t.kind === 'named' || t.kind === 'parent') && org === customerOf(c.org))
}

function covers(scope: Scope, c: Caller, t: Target): boolean {
  const org = t.org
  switch (scope) {
    case 'all':
    case 'any':
      return true
    case 'any but the vendor':
      return org !== 'V'
    case 'any customer':
      return org !== 'omitted' && KIND[org] === 'customer'
    case 'customer or partner':
      // The new organization's type follows its parent: the vendor's child is a customer, a customer's a partner.
      return org !== 'omitted' && (KIND[org] === 'vendor' || KIND[org] === 'customer')
    case 'a partner of itself':
      return org === 'omitted' || org === c.org
    case 'itself':
      return org === c.org
    case 'itself and its partners':
      return org === c.org || (org !== 'omitted' && PARENT[org] === c.org)
    case 'its partners':
      return org !== 'omitted' && PARENT[org] === c.org
    case 'its own':
      return org === c.org
    case "its customer's":
      return org === customerOf(c.org)
  }
}

/** `hidden`: a list answers (200) without the target, which is outside what the caller reads. */
type Outcome = 'allowed' | 'hidden' | number

/** The table's cell for `c` under `action`. */
function cellOf(action: Action, c: Caller): Scope | 403 | 404 {
  const cells = TABLE[action]
  let cell = cells[COLUMNS.indexOf(column(c))]!
  if (cell === 'as its organization type reads') cell = cells[COLUMNS.indexOf(readerColumn(c))]!
  if (cell === 'as its organization type reads') throw new Error(`${action}: the readers' own cell says "as its organization type reads"`)
  return cell
}

/** A list has no 404: the role decides first, then the scope decides what it shows. */
function expectedInList(action: Action, c: Caller, t: Target): Outcome {
  const cell = cellOf(action, c)
  if (cell === 403 || cell === 404) return cell
  return reaches(c, t) && covers(cell, c, t) ? 'allowed' : 'hidden'
}

/** The answer the contract prescribes for `c` doing `action` on `t`. */
function expected(action: Action, c: Caller, t: Target): Outcome {
  if (!reaches(c, t)) return 404
  // docs/api.md "Endpoints": environment endpoints of anything but a customer enabled for them are 404.
  if (action.startsWith('organization environments') && !ENVIRONMENTS_ENABLED.includes(t.org as OrgName)) return 404
  const cell = cellOf(action, c)
  if (cell === 403 || cell === 404) return cell
  // docs/api.md "Endpoints": the organization_id of a new record must be a customer's (a body fault).
  if (t.kind === 'named' && KIND[t.org as OrgName] !== 'customer') return 400
  if (covers(cell, c, t)) return 'allowed'
  // Inside scope and role, outside the cell's scope:
  if (action === 'create an organization') return 400 // docs/api.md "Endpoints": the parent is a body fault
  if (action === 'suspend, activate' && t.org === 'V') return 409 // the vendor cannot be suspended or activated
  return 403
}

// ---------------------------------------------------------------------------------------------
// The world.

let h: Harness
const ORG = {} as Record<OrgName, string>

interface Tenant {
  /** PROD only, no enrollments: DEV can be added and removed. */
  readonly app: string
  /** PROD, with the enrollment. */
  readonly app2: string
  readonly consumer: string
  readonly installation: string
  readonly enrollment: string
}
const TENANT = {} as Record<'A' | 'B', Tenant>
/** A token of each organization (a viewer's, never used to call with): what the token endpoints aim at. */
const TOKEN = {} as Record<OrgName, string>
/** The fresh token a revocation is tried on (a revocation cannot be undone). */
let revocable = ''

const KEY = p256PublicKey()

/** A request by the vendor's admin that must succeed (set-up and restoring state). */
async function must(method: string, path: string, body?: unknown) {
  const res = await h.request(method, path, { body })
  if (res.status !== 200 && res.status !== 201) throw new Error(`set-up ${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body
}

/** Everything at `paths` as the vendor's admin sees it (status and body, less the trace id). */
async function vendorView(paths: string[]) {
  const out: Record<string, unknown> = {}
  for (const path of paths) {
    const res = await h.request('GET', path)
    const { trace_id: _, ...body } = (res.body ?? {}) as Record<string, unknown>
    out[path] = { status: res.status, body }
  }
  return out
}

async function setUpTenant(name: 'A' | 'B'): Promise<void> {
  ORG[name] = await h.createCustomer(`Customer ${name}`, { default: 'PROD', supported: 'DEV,PROD' })
  ORG[`${name}P`] = await h.createPartner(ORG[name], `Partner of ${name}`)
  const app = (await must('POST', '/api/applications', { organization_id: ORG[name], description: `${name} app` })).application.application_id
  const app2 = (await must('POST', '/api/applications', { organization_id: ORG[name], description: `${name} app2` })).application.application_id
  const t = { app, app2, consumer: crypto.randomUUID(), installation: crypto.randomUUID(), enrollment: crypto.randomUUID() }
  await must('POST', '/api/enrollments', {
    enrollment_id: t.enrollment,
    consumer_id: t.consumer,
    installation_id: t.installation,
    application_id: app2,
    environment: 'PROD',
    installation_description: `${name} phone`,
  })
  await must('POST', `/api/enrollments/${t.enrollment}/keysets`, { client_enclave_key: KEY })
  TENANT[name] = t
}

beforeAll(async () => {
  h = await createHarness()
  ORG.V = h.vendorId
  await setUpTenant('A')
  await setUpTenant('B')
  ORG.AP2 = await h.createPartner(ORG.A, 'Second partner of A')
  ORG.C = await h.createCustomer('Customer C')
  for (const org of ALL_ORGS) TOKEN[org] = tokenIdOf(h.token(ORG[org], 'viewer'))!
})
afterAll(() => h.close())

// ---------------------------------------------------------------------------------------------
// State helpers: the vendor's admin puts a record in the state an allowed call needs.

async function stateOf(path: string, field: string): Promise<string> {
  const res = await h.request('GET', path)
  return res.body[field].state
}

async function ensureState(kind: 'organizations' | 'applications' | 'consumers' | 'enrollments', id: string, state: 'active' | 'suspended') {
  const field = kind.slice(0, -1)
  if ((await stateOf(`/api/${kind}/${id}`, field)) !== state) await must('PATCH', `/api/${kind}/${id}/${state === 'active' ? 'activate' : 'suspend'}`)
}

async function ensureInstallation(id: string, suspended: boolean) {
  const state = await stateOf(`/api/installations/${id}`, 'installation')
  if (suspended && state !== 'suspended') await must('PATCH', `/api/installations/${id}/suspend`)
  if (!suspended && state === 'suspended') await must('PATCH', `/api/installations/${id}/verify`)
}

async function orgEnvironments(org: string): Promise<{ default: string; supported: string[] }> {
  const body = await must('GET', `/api/organizations/${org}/environments`)
  return { default: body.default, supported: body.supported.split(',') }
}

/** The organization's environments back to default PROD, supported DEV and PROD (plus QA if asked). */
async function resetOrgEnvironments(org: string, withQa: boolean) {
  const envs = await orgEnvironments(org)
  if (envs.default !== 'PROD') await must('PATCH', `/api/organizations/${org}/environments`, { default: 'PROD' })
  if (withQa && !envs.supported.includes('QA')) await must('PATCH', `/api/organizations/${org}/environments`, { environment: 'QA' })
  if (!withQa && envs.supported.includes('QA')) await must('DELETE', `/api/organizations/${org}/environments`, { environment: 'QA' })
}

async function resetAppEnvironments(app: string, withDev: boolean) {
  const has = (await must('GET', `/api/environments/${app}`)).environments.split(',').includes('DEV')
  if (withDev && !has) await must('POST', `/api/environments/${app}`, { environment: 'DEV' })
  if (!withDev && has) await must('DELETE', `/api/environments/${app}`, { environment: 'DEV' })
}

// ---------------------------------------------------------------------------------------------
// The endpoints under each action.

interface Call {
  readonly method: string
  readonly path: string
  readonly body?: unknown
}

interface Endpoint {
  /** `METHOD /path/:param`, as in app.routes: checks that every route is under some action. */
  readonly route: string
  readonly targets: readonly Target[]
  readonly call: (t: Target, c: Caller) => Call
  /** The status of an allowed call. */
  readonly success: 200 | 201
  /** Puts the target where an allowed call changes something (a denied one is tried on the same state). */
  readonly prepare?: (t: Target, c: Caller) => Promise<void>
  /** Undoes what an allowed call did, so the next call starts from the same world. */
  readonly restore?: (t: Target) => Promise<void>
  /** What the vendor's admin reads back to see that a denied call changed nothing. */
  readonly readBack: (t: Target) => string[]
  /** Reads only: the list endpoint whose items must hold the target exactly when allowed. */
  readonly list?: { readonly path: string; readonly items: string; readonly id: (t: Target) => string; readonly key: string }
  /** The call is itself a list (no 404): whether its answer shows the target. */
  readonly listed?: (body: any, t: Target) => boolean // eslint-disable-line @typescript-eslint/no-explicit-any
}

const orgTargets = (kind: 'org' | 'parent', names: readonly (OrgName | 'omitted')[]): Target[] => names.map((org) => ({ kind, org }))
const ALL_ORGS: OrgName[] = ['V', 'A', 'AP', 'AP2', 'B', 'BP', 'C']
const ORG_TARGETS = orgTargets('org', ALL_ORGS)
const OWNED_TARGETS: Target[] = [
  { kind: 'owned', org: 'A' },
  { kind: 'owned', org: 'B' },
]
const NAMED_TARGETS: Target[] = (['A', 'B', 'AP', 'AP2', 'V'] as const).map((org) => ({ kind: 'named', org }))
const TOKEN_TARGETS: Target[] = ALL_ORGS.map((org) => ({ kind: 'token', org }))
/** A record whose events the audit trail shows: an application of a tenant, or the vendor itself (`vendor.init`). */
const auditTarget = (t: Target) => (t.org === 'V' ? ORG.V : tenant(t).app)
const id = (t: Target) => ORG[t.org as OrgName]
const tenant = (t: Target) => TENANT[t.org as 'A' | 'B']
const orgPaths = (t: Target) => [`/api/organizations/${id(t)}`, '/api/organizations']

/**
 * Suspending the caller's own organization or its customer would make its token a 401: those calls
 * are denied anyway, so they are tried on the active organization (still no 2xx if a rule broke).
 */
const ownsToken = (t: Target, c: Caller) => t.org === c.org || t.org === customerOf(c.org)

const ENDPOINTS: Record<Action, Endpoint[]> = {
  'read organizations in scope': [
    {
      route: 'GET /api/organizations/:organization_id',
      targets: ORG_TARGETS,
      call: (t) => ({ method: 'GET', path: `/api/organizations/${id(t)}` }),
      success: 200,
      readBack: orgPaths,
      list: { path: '/api/organizations', items: 'organizations', key: 'organization_id', id },
    },
  ],
  'create an organization': [
    {
      route: 'POST /api/organizations',
      targets: orgTargets('parent', ['V', 'A', 'AP', 'B', 'C', 'omitted']),
      call: (t, c) => ({ method: 'POST', path: '/api/organizations', body: { description: `by ${c.label}`, ...(t.org === 'omitted' ? {} : { parent_id: id(t) }) } }),
      success: 201,
      readBack: () => ['/api/organizations'],
    },
  ],
  'update description': [
    {
      route: 'PATCH /api/organizations/:organization_id',
      targets: ORG_TARGETS,
      call: (t, c) => ({ method: 'PATCH', path: `/api/organizations/${id(t)}`, body: { description: `${t.org} renamed by ${c.label}` } }),
      success: 200,
      readBack: orgPaths,
    },
  ],
  'suspend, activate': [
    {
      route: 'PATCH /api/organizations/:organization_id/suspend',
      targets: ORG_TARGETS,
      call: (t) => ({ method: 'PATCH', path: `/api/organizations/${id(t)}/suspend` }),
      success: 200,
      prepare: async (t) => (t.org === 'V' ? undefined : ensureState('organizations', id(t), 'active')),
      restore: async (t) => (t.org === 'V' ? undefined : ensureState('organizations', id(t), 'active')),
      readBack: orgPaths,
    },
    {
      route: 'PATCH /api/organizations/:organization_id/activate',
      targets: ORG_TARGETS,
      call: (t) => ({ method: 'PATCH', path: `/api/organizations/${id(t)}/activate` }),
      success: 200,
      prepare: async (t, c) => (t.org === 'V' || ownsToken(t, c) ? undefined : ensureState('organizations', id(t), 'suspended')),
      restore: async (t) => (t.org === 'V' ? undefined : ensureState('organizations', id(t), 'active')),
      readBack: orgPaths,
    },
  ],
  'organization environments: view': [
    {
      route: 'GET /api/organizations/:organization_id/environments',
      targets: ORG_TARGETS,
      call: (t) => ({ method: 'GET', path: `/api/organizations/${id(t)}/environments` }),
      success: 200,
      readBack: (t) => [`/api/organizations/${id(t)}/environments`],
    },
  ],
  'organization environments: change': [
    ['PATCH', { default: 'DEV' }, false],
    ['PATCH', { environment: 'QA' }, false],
    ['DELETE', { environment: 'QA' }, true],
  ].map(([method, body, withQa]) => ({
    route: `${method} /api/organizations/:organization_id/environments`,
    targets: ORG_TARGETS,
    call: (t: Target) => ({ method: method as string, path: `/api/organizations/${id(t)}/environments`, body }),
    success: 200 as const,
    prepare: async (t: Target) => (ENVIRONMENTS_ENABLED.includes(t.org as OrgName) ? resetOrgEnvironments(id(t), withQa as boolean) : undefined),
    restore: async (t: Target) => (ENVIRONMENTS_ENABLED.includes(t.org as OrgName) ? resetOrgEnvironments(id(t), false) : undefined),
    readBack: (t: Target) => [`/api/organizations/${id(t)}/environments`, `/api/organizations/${id(t)}`],
  })),
  'applications and their environments: create, change': [
    {
      route: 'POST /api/applications',
      targets: NAMED_TARGETS,
      call: (t, c) => ({ method: 'POST', path: '/api/applications', body: { organization_id: id(t), description: `app by ${c.label}` } }),
      success: 201,
      readBack: () => ['/api/applications'],
    },
    {
      route: 'PATCH /api/applications/:application_id',
      targets: OWNED_TARGETS,
      call: (t, c) => ({ method: 'PATCH', path: `/api/applications/${tenant(t).app}`, body: { description: `renamed by ${c.label}` } }),
      success: 200,
      readBack: (t) => [`/api/applications/${tenant(t).app}`],
    },
    ...(['suspend', 'activate'] as const).map(
      (action): Endpoint => ({
        route: `PATCH /api/applications/:application_id/${action}`,
        targets: OWNED_TARGETS,
        call: (t) => ({ method: 'PATCH', path: `/api/applications/${tenant(t).app}/${action}` }),
        success: 200,
        prepare: (t) => ensureState('applications', tenant(t).app, action === 'suspend' ? 'active' : 'suspended'),
        restore: (t) => ensureState('applications', tenant(t).app, 'active'),
        readBack: (t) => [`/api/applications/${tenant(t).app}`],
      }),
    ),
    ...(['POST', 'DELETE'] as const).map(
      (method): Endpoint => ({
        route: `${method} /api/environments/:application_id`,
        targets: OWNED_TARGETS,
        call: (t) => ({ method, path: `/api/environments/${tenant(t).app}`, body: { environment: 'DEV' } }),
        success: 200,
        prepare: (t) => resetAppEnvironments(tenant(t).app, method === 'DELETE'),
        restore: (t) => resetAppEnvironments(tenant(t).app, false),
        readBack: (t) => [`/api/environments/${tenant(t).app}`, `/api/applications/${tenant(t).app}`],
      }),
    ),
  ],
  'consumers, installations, enrollments, keysets: create, change': [
    {
      route: 'POST /api/consumers',
      targets: NAMED_TARGETS,
      call: (t) => ({ method: 'POST', path: '/api/consumers', body: { consumer_id: crypto.randomUUID(), organization_id: id(t) } }),
      success: 201,
      readBack: () => ['/api/consumers?page_size=1000'],
    },
    ...(['suspend', 'activate'] as const).map(
      (action): Endpoint => ({
        route: `PATCH /api/consumers/:consumer_id/${action}`,
        targets: OWNED_TARGETS,
        call: (t) => ({ method: 'PATCH', path: `/api/consumers/${tenant(t).consumer}/${action}` }),
        success: 200,
        prepare: (t) => ensureState('consumers', tenant(t).consumer, action === 'suspend' ? 'active' : 'suspended'),
        restore: (t) => ensureState('consumers', tenant(t).consumer, 'active'),
        readBack: (t) => [`/api/consumers/${tenant(t).consumer}`],
      }),
    ),
    {
      route: 'POST /api/installations',
      targets: NAMED_TARGETS,
      call: (t) => ({ method: 'POST', path: '/api/installations', body: { installation_id: crypto.randomUUID(), description: 'new', organization_id: id(t) } }),
      success: 201,
      readBack: () => ['/api/installations?page=1&page_size=1000'],
    },
    {
      route: 'PATCH /api/installations/:installation_id',
      targets: OWNED_TARGETS,
      call: (t, c) => ({ method: 'PATCH', path: `/api/installations/${tenant(t).installation}`, body: { description: `by ${c.label}` } }),
      success: 200,
      readBack: (t) => [`/api/installations/${tenant(t).installation}`],
    },
    ...(['suspend', 'verify'] as const).map(
      (action): Endpoint => ({
        route: `PATCH /api/installations/:installation_id/${action}`,
        targets: OWNED_TARGETS,
        call: (t) => ({ method: 'PATCH', path: `/api/installations/${tenant(t).installation}/${action}` }),
        success: 200,
        prepare: (t) => ensureInstallation(tenant(t).installation, action === 'verify'),
        readBack: (t) => [`/api/installations/${tenant(t).installation}`],
      }),
    ),
    {
      route: 'POST /api/enrollments',
      targets: OWNED_TARGETS,
      call: (t) => ({
        method: 'POST',
        path: '/api/enrollments',
        body: {
          enrollment_id: crypto.randomUUID(),
          consumer_id: crypto.randomUUID(),
          installation_id: crypto.randomUUID(),
          application_id: tenant(t).app2,
          environment: 'PROD',
          installation_description: 'new',
        },
      }),
      success: 201,
      readBack: () => ['/api/enrollments?page_size=1000', '/api/consumers?page_size=1000', '/api/installations?page=1&page_size=1000'],
    },
    ...(['suspend', 'activate'] as const).map(
      (action): Endpoint => ({
        route: `PATCH /api/enrollments/:enrollment_id/${action}`,
        targets: OWNED_TARGETS,
        call: (t) => ({ method: 'PATCH', path: `/api/enrollments/${tenant(t).enrollment}/${action}` }),
        success: 200,
        prepare: (t) => ensureState('enrollments', tenant(t).enrollment, action === 'suspend' ? 'active' : 'suspended'),
        restore: (t) => ensureState('enrollments', tenant(t).enrollment, 'active'),
        readBack: (t) => [`/api/enrollments/${tenant(t).enrollment}`],
      }),
    ),
    {
      route: 'POST /api/enrollments/:enrollment_id/keysets',
      targets: OWNED_TARGETS,
      call: (t) => ({ method: 'POST', path: `/api/enrollments/${tenant(t).enrollment}/keysets`, body: { client_enclave_key: KEY } }),
      success: 201,
      readBack: (t) => [`/api/enrollments/${tenant(t).enrollment}`, `/api/enrollments/${tenant(t).enrollment}/keysets`],
    },
  ],
  'read customer-owned records in scope': (
    [
      ['GET /api/applications/:application_id', (t: Target) => `/api/applications/${tenant(t).app}`, { path: '/api/applications', items: 'applications', key: 'application_id', id: (t: Target) => tenant(t).app }],
      ['GET /api/environments/:application_id', (t: Target) => `/api/environments/${tenant(t).app}`, undefined],
      ['GET /api/consumers/:consumer_id', (t: Target) => `/api/consumers/${tenant(t).consumer}`, { path: '/api/consumers?page_size=1000', items: 'consumers', key: 'consumer_id', id: (t: Target) => tenant(t).consumer }],
      [
        'GET /api/installations/:installation_id',
        (t: Target) => `/api/installations/${tenant(t).installation}`,
        { path: '/api/installations?page_size=1000', items: 'installations', key: 'installation_id', id: (t: Target) => tenant(t).installation },
      ],
      [
        'GET /api/enrollments/:enrollment_id',
        (t: Target) => `/api/enrollments/${tenant(t).enrollment}`,
        { path: '/api/enrollments?page_size=1000', items: 'enrollments', key: 'enrollment_id', id: (t: Target) => tenant(t).enrollment },
      ],
      ['GET /api/enrollments/:enrollment_id/keysets', (t: Target) => `/api/enrollments/${tenant(t).enrollment}/keysets`, undefined],
    ] as const
  ).map(
    ([route, path, list]): Endpoint => ({
      route,
      targets: OWNED_TARGETS,
      call: (t) => ({ method: 'GET', path: path(t) }),
      success: 200,
      readBack: (t) => [path(t)],
      ...(list ? { list } : {}),
    }),
  ),
  'tokens: read, issue, revoke': [
    {
      route: 'GET /api/tokens/:token_id',
      targets: TOKEN_TARGETS,
      call: (t) => ({ method: 'GET', path: `/api/tokens/${TOKEN[t.org as OrgName]}` }),
      success: 200,
      readBack: (t) => [`/api/tokens/${TOKEN[t.org as OrgName]}`],
      list: { path: '/api/tokens?page_size=1000', items: 'tokens', key: 'token_id', id: (t) => TOKEN[t.org as OrgName] },
    },
    {
      route: 'POST /api/tokens',
      targets: TOKEN_TARGETS,
      call: (t, c) => ({ method: 'POST', path: '/api/tokens', body: { organization_id: id(t), role: 'viewer', description: `by ${c.label}` } }),
      success: 201,
      readBack: () => ['/api/tokens?page_size=1000'],
    },
    {
      route: 'PATCH /api/tokens/:token_id/revoke',
      targets: TOKEN_TARGETS,
      prepare: async (t) => void (revocable = tokenIdOf(h.token(id(t), 'viewer'))!),
      call: () => ({ method: 'PATCH', path: `/api/tokens/${revocable}/revoke` }),
      success: 200,
      readBack: () => [`/api/tokens/${revocable}`],
    },
  ],
  'audit events: read': [
    {
      route: 'GET /api/audit-events',
      targets: [...OWNED_TARGETS, { kind: 'owned', org: 'V' }],
      call: (t) => ({ method: 'GET', path: `/api/audit-events?target_ids=${auditTarget(t)}&page_size=1000` }),
      success: 200,
      readBack: () => [],
      listed: (body, t) => (body.audit_events as { target: { id: string } }[]).some((event) => event.target.id === auditTarget(t)),
    },
  ],
}

// ---------------------------------------------------------------------------------------------
// The tests: one per action and caller, every endpoint of the action against every target.

test('every /api route falls under some action of the table', () => {
  const covered = new Set(Object.values(ENDPOINTS).flatMap((endpoints) => endpoints.map((e) => e.route)))
  // The lists are checked through the `list` of a read endpoint.
  for (const e of Object.values(ENDPOINTS).flat()) if (e.list) covered.add(`GET ${e.list.path.split('?')[0]}`)
  const routes = h.app.routes.filter((r) => r.path.startsWith('/api/')).map((r) => `${r.method} ${r.path}`)
  expect(routes.filter((r) => !covered.has(r))).toEqual([])
  expect([...covered].filter((r) => !routes.includes(r))).toEqual([])
})

test('the expectations use every kind of cell: allowed, 403 and 404 under each action', () => {
  for (const action of ACTIONS) {
    const outcomes = new Set(CALLERS.flatMap((c) => ENDPOINTS[action].flatMap((e) => e.targets.map((t) => (e.listed ? expectedInList : expected)(action, c, t)))))
    expect({ action, allowed: outcomes.has('allowed'), denied: outcomes.has(403) || outcomes.has(404) }).toEqual({ action, allowed: true, denied: true })
  }
})

for (const action of ACTIONS) {
  describe(action, () => {
    for (const caller of CALLERS) {
      test(caller.label, async () => {
        const token = h.token(ORG[caller.org], caller.role)
        const wrong: string[] = []
        for (const endpoint of ENDPOINTS[action]) {
          for (const target of endpoint.targets) {
            const want = (endpoint.listed ? expectedInList : expected)(action, caller, target)
            await endpoint.prepare?.(target, caller)
            const before = await vendorView(endpoint.readBack(target))
            const call = endpoint.call(target, caller)
            const res = await h.request(call.method, call.path, { token, body: call.body })
            const where = `${endpoint.route} on ${target.kind} ${target.org}`
            if (want === 'allowed' || want === 'hidden') {
              if (res.status !== endpoint.success) wrong.push(`${where}: ${res.status} ${res.body?.code ?? ''}, expected ${endpoint.success}`)
              else if (endpoint.listed && endpoint.listed(res.body, target) !== (want === 'allowed')) {
                wrong.push(`${where}: the target ${want === 'allowed' ? 'not listed' : 'listed'}, expected the opposite`)
              }
            } else {
              if (res.status !== want) wrong.push(`${where}: ${res.status} ${res.body?.code ?? ''}, expected ${want}`)
              const after = await vendorView(endpoint.readBack(target))
              if (!Bun.deepEquals(after, before)) wrong.push(`${where}: a denied call changed ${JSON.stringify(after)}`)
            }
            if (endpoint.list) {
              const { path, items, key, id } = endpoint.list
              const list = await h.request('GET', path, { token })
              const listed = list.status === 200 && (list.body[items] as Record<string, string>[]).some((record) => record[key] === id(target))
              if (listed !== (want === 'allowed')) wrong.push(`${path}: ${target.org} ${listed ? 'listed' : 'not listed'}, expected the opposite`)
            }
            await endpoint.restore?.(target)
          }
        }
        expect(wrong).toEqual([])
      }, 30_000)
    }
  })
}
