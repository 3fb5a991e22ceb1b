/**
 * `keyward tokens list` and `keyward tokens revoke`, and where every token command of the CLI runs:
 * on a database, written there directly (src/cli/database.ts); on a data dir, here or by the server
 * that holds it (src/cli/data-dir.ts).
 */
import { printOutput } from './stdout'
import { runOnDataDir } from './data-dir'
import { runOnDatabase } from './database'
import type { TokenCommand, TokenCommandAnswer } from './token-commands'
import { UsageError } from './usage'
import { dashedTokenId, tokenIdOf } from '../auth/tokens'

export interface TokensOptions {
  readonly data: string
  readonly databaseUrl?: string | undefined
  readonly org?: string
  /** The subcommand and its argument: `list`, or `revoke TOKEN_ID`. */
  readonly positionals: readonly string[]
}

export function runTokenCommand(where: { data: string; databaseUrl?: string | undefined }, command: TokenCommand): Promise<TokenCommandAnswer> {
  return where.databaseUrl ? runOnDatabase(where.databaseUrl, command) : runOnDataDir(where.data, command)
}

/**
 * TOKEN_ID as given: the UUID of its record, or the 32 hex digits the token string carries (README
 * "Tokens"). A whole token is refused, naming its id but not its secret: a secret on a command line
 * stays in shell histories and process lists.
 */
function tokenIdGiven(text: string): string {
  const carried = tokenIdOf(text)
  if (carried) throw new UsageError(`that is a token, not a TOKEN_ID: its token_id is ${carried}`)
  return /^[0-9a-f]{32}$/i.test(text) ? dashedTokenId(text.toLowerCase()) : text.toLowerCase()
}

export async function tokensCommand(options: TokensOptions): Promise<number> {
  const [subcommand, ...rest] = options.positionals
  if (subcommand === 'list') {
    if (rest.length > 0) throw new UsageError(`unexpected argument '${rest[0]}'`)
    const organizationId = options.org === undefined ? null : options.org.toLowerCase()
    const answer = (await runTokenCommand(options, { command: 'tokens list', organization_id: organizationId })) as Extract<TokenCommandAnswer, { tokens: unknown }>
    // One JSON record per line, never a secret (the records hold none).
    printOutput(answer.tokens.map((token) => `${JSON.stringify(token)}\n`).join(''))
    return 0
  }
  if (subcommand === 'revoke') {
    if (options.org !== undefined) throw new UsageError('--org is for tokens list')
    if (rest.length !== 1) throw new UsageError('tokens revoke takes one TOKEN_ID')
    const tokenId = tokenIdGiven(rest[0]!)
    const answer = (await runTokenCommand(options, { command: 'tokens revoke', token_id: tokenId })) as Extract<TokenCommandAnswer, { revoked: boolean }>
    if (!answer.revoked) console.error(`keyward: token ${tokenId} was already revoked`)
    return 0
  }
  throw new UsageError(subcommand === undefined ? 'tokens needs a subcommand: list or revoke' : `unknown subcommand '${subcommand}'`)
}
