/**
 * What `issue-token`, `tokens revoke` and `tokens list` do to the data, the same whether the CLI
 * holds the data dir itself or hands the command to the server that holds it (src/cli/data-dir.ts,
 * README "Tokens"): one definition, run on whichever storage is the dir's only writer.
 */
import * as v from 'valibot'
import type { Storage } from '../storage/storage'
import { MAX_TOKEN_TTL_SECONDS, ROLES } from '../auth/tokens'
import { TokenService } from '../modules/tokens/service'
import { tokenViewAt } from '../modules/tokens/model'
import { Description } from '../modules/shared/model'
import type { Actor } from '../modules/shared/audit'
import { ApiError } from '../modules/shared/errors'
import { UUID } from '../http/access'
import { StorageUnavailableError } from '../store/wal'
import { UsageError } from './usage'

/**
 * An identifier as typed on the command line: not one of ours if it is not a UUID (exit 2, unknown).
 * Bounded, but long enough for a token's secret pasted by mistake to get that answer too.
 */
const Id = v.pipe(v.string(), v.maxLength(256))

/** An unknown id as a message names it: a UUID as typed; anything else is not echoed (it may be a token's secret). */
const named = (what: string, id: string) => (UUID.test(id) ? `unknown ${what} '${id}'` : `unknown ${what}: the id given is not a UUID`)

/** As sent over the control socket: checked like any other input. */
export const TokenCommand = v.variant('command', [
  v.object({
    command: v.literal('issue-token'),
    organization_id: Id,
    role: v.picklist(ROLES),
    ttl_seconds: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_TOKEN_TTL_SECONDS)),
    description: v.nullable(Description),
    // The token, made by the CLI (its secret never leaves it): the command is the same each time it
    // is sent, so one sent again after its answer was lost (a server stopping) makes it once.
    token_id: v.pipe(v.string(), v.uuid()),
    token_hash: v.pipe(v.string(), v.regex(/^[0-9a-f]{64}$/)),
  }),
  v.object({ command: v.literal('tokens revoke'), token_id: Id }),
  v.object({ command: v.literal('tokens list'), organization_id: v.nullable(Id) }),
])
export type TokenCommand = v.InferOutput<typeof TokenCommand>

export type TokenCommandAnswer =
  /** The id of the token recorded (now, or by the same command sent before). */
  | { readonly issued: string }
  /** False when the token was revoked already (nothing changed, no event). */
  | { readonly revoked: boolean }
  | { readonly tokens: readonly ReturnType<ReturnType<typeof tokenViewAt>>[] }

/** The command names what does not exist (an organization, a token): exit 2, like a bad command line. */
export class UnknownRecordError extends UsageError {}

/**
 * A command whose id is no UUID names nothing: refused before anything is looked up, and by the
 * CLI before it goes to a server (a token's secret pasted by mistake, or a longer text, would not
 * pass the socket's check).
 */
export function refuseUnknownIds(command: TokenCommand): void {
  const [what, id] = command.command === 'tokens revoke' ? ['token', command.token_id] : ['organization', command.organization_id]
  if (id !== null && !UUID.test(id)) throw new UnknownRecordError(named(what, id))
}

/**
 * The command's answer, given as a read's is (`Storage.settle`): once what it read is durable (a
 * token being revoked by a request, one being made), and, if a write it may have read was undone
 * meanwhile, the 503's error instead (exit 1), never an answer resting on it: "already revoked"
 * by a revocation that failed, a list with a token that was never made.
 */
export async function performTokenCommand(storage: Storage, command: TokenCommand): Promise<TokenCommandAnswer> {
  refuseUnknownIds(command)
  const since = storage.mark()
  let answer: TokenCommandAnswer
  try {
    answer = await answerTokenCommand(storage, command, { cli: command.command, since })
  } catch (error) {
    // Its own write failed (a full disk): that cause is the one to report, not the undo it made,
    // which the settle below would throw instead.
    if (error instanceof StorageUnavailableError) throw error
    await storage.settle(undefined, since)
    throw error
  }
  return await storage.settle(answer, since)
}

async function answerTokenCommand(storage: Storage, command: TokenCommand, actor: Actor): Promise<TokenCommandAnswer> {
  const tokens = new TokenService(storage)
  switch (command.command) {
    case 'issue-token': {
      const organization = await storage.find('organizations', command.organization_id)
      if (!organization) throw new UnknownRecordError(named('organization', command.organization_id))
      const issued = { tokenId: command.token_id, tokenHash: command.token_hash }
      const recorded = await storage.find('tokens', issued.tokenId)
      // This very command, sent again: it was made (once is all). Another token of that id (no two
      // random UUIDs meet) is not overwritten.
      if (recorded) {
        if (recorded.token_hash === issued.tokenHash && recorded.organization_id === organization.organization_id) return { issued: issued.tokenId }
        throw new Error(`a token ${issued.tokenId} is recorded already`)
      }
      const grant = { organization, role: command.role, ttlSeconds: command.ttl_seconds, description: command.description }
      await tokens.issue(grant, actor, issued)
      return { issued: issued.tokenId }
    }
    case 'tokens revoke': {
      const token = await storage.find('tokens', command.token_id)
      if (!token) throw new UnknownRecordError(named('token', command.token_id))
      try {
        await tokens.revoke(token, actor)
        return { revoked: true }
      } catch (error) {
        if (error instanceof ApiError && error.code === 'already_revoked') return { revoked: false }
        throw error
      }
    }
    case 'tokens list': {
      if (command.organization_id !== null && !(await storage.find('organizations', command.organization_id))) {
        throw new UnknownRecordError(named('organization', command.organization_id))
      }
      return { tokens: (await tokens.listAll(command.organization_id)).map(tokenViewAt(storage.now())) }
    }
  }
}
