/** `keyward issue-token`: records a token and prints it; beside a running server too (src/cli/tokens.ts). */
import { newToken, parseDuration, parseRole, tokenIdOf, ttlProblem } from '../auth/tokens'
import { printSecretLine, requireStdoutForSecret } from './stdout'
import { runTokenCommand } from './tokens'
import { descriptionFlag, UsageError } from './usage'

export interface IssueTokenOptions {
  readonly data: string
  readonly databaseUrl?: string | undefined
  readonly org?: string
  readonly role?: string
  readonly ttl: string
  readonly description?: string
}

export async function issueTokenCommand(options: IssueTokenOptions): Promise<number> {
  if (!options.org) throw new UsageError('--org is required')
  if (!options.role) throw new UsageError('--role is required')
  const role = parseRole(options.role)
  if (!role) throw new UsageError(`unknown role '${options.role}': use admin, application_admin or viewer`)
  const ttlIs = ttlProblem(options.ttl)
  if (ttlIs !== null) throw new UsageError(`invalid --ttl '${options.ttl}': it must be ${ttlIs}`)
  const ttl = parseDuration(options.ttl)!
  const description = options.description === undefined ? null : descriptionFlag('--description', options.description)
  requireStdoutForSecret('the token', 'none was issued')
  // Made here: the server (or this process) records its id and hash; the secret stays in this process.
  const { token, tokenId, tokenHash } = newToken()
  const command = { command: 'issue-token', organization_id: options.org.toLowerCase(), role, ttl_seconds: ttl, description, token_id: tokenId, token_hash: tokenHash } as const
  await runTokenCommand(options, command)
  const store = options.databaseUrl ? '--database-url URL' : `--data ${options.data}`
  printSecretLine(`${token}\n`, `the token ${tokenIdOf(token)} was recorded but not shown: revoke it with keyward tokens revoke ${tokenIdOf(token)} ${store}, and issue another`)
  return 0
}
