/** The callers of the role table of docs/api.md "Authentication, roles and scope", and the problem-body check every HTTP test uses. */
import { expect } from 'bun:test'
import type { Role } from '../../src/auth/tokens'
import type { ApiResponse } from './harness'

export interface Actor {
  readonly label: string
  /** The vendor, customer A, or A's partner. */
  readonly org: 'V' | 'A' | 'AP'
  readonly role: Role
}

export const ACTORS: Actor[] = [
  { label: 'vendor admin', org: 'V', role: 'admin' },
  { label: 'vendor application_admin', org: 'V', role: 'application_admin' },
  { label: 'vendor viewer', org: 'V', role: 'viewer' },
  { label: 'customer admin', org: 'A', role: 'admin' },
  { label: 'customer application_admin', org: 'A', role: 'application_admin' },
  { label: 'customer viewer', org: 'A', role: 'viewer' },
  { label: 'partner admin', org: 'AP', role: 'admin' },
  { label: 'partner application_admin', org: 'AP', role: 'application_admin' },
  { label: 'partner viewer', org: 'AP', role: 'viewer' },
]

/** An RFC 9457 problem body with `status`, the trace id of its header, and `code` when given. */
export function expectProblem(res: ApiResponse, status: number, code?: string) {
  expect({ status: res.status, body: res.body }).toMatchObject({ status, body: { status, type: 'about:blank' } })
  expect(res.headers.get('content-type')).toBe('application/problem+json')
  expect(res.body.trace_id).toBe(res.headers.get('x-trace-id'))
  if (code) expect(res.body.code).toBe(code)
}
