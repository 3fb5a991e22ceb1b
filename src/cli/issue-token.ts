/** `keyward issue-token`: reads the data dir without locking it, so it works beside a running server. */
import { readDataDir } from '../store/read-only'
import { readSecret } from '../auth/secret'
import { mintToken, parseDuration, parseRole } from '../auth/tokens'
import { UsageError } from './usage'
import { issueTokenOnDatabase } from './database'

export async function issueTokenCommand(options: { data: string; databaseUrl?: string | undefined; org?: string; role?: string; ttl: string }): Promise<number> {
  if (!options.org) throw new UsageError('--org is required')
  if (!options.role) throw new UsageError('--role is required')
  const role = parseRole(options.role)
  if (!role) throw new UsageError(`unknown role '${options.role}': use admin, application_admin or viewer`)
  const ttl = parseDuration(options.ttl)
  if (ttl === null) throw new UsageError(`invalid --ttl '${options.ttl}': use a number and s, m, h or d, like 90d`)
  if (options.databaseUrl) return issueTokenOnDatabase(options.databaseUrl, options.org, role, ttl)
  const secret = await readSecret(options.data)
  if (!secret) throw new Error(`data dir ${options.data} is not initialised: run 'keyward init' first`)
  const orgId = options.org.toLowerCase()
  const { tables } = await readDataDir(options.data)
  if (!tables.organizations.has(orgId)) throw new UsageError(`unknown organization '${options.org}'`)
  process.stdout.write(mintToken(secret, { org: orgId, role, exp: Math.floor(Date.now() / 1000) + ttl }) + '\n')
  return 0
}
