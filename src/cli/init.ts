/**
 * `keyward init`, and the first-run initialisation of `serve`: the vendor organization and a vendor
 * admin token, recorded with their audit events in one transaction, the token printed once.
 */
import { Store } from '../store/store'
import { EmbeddedStorage } from '../storage/embedded'
import type { Storage } from '../storage/storage'
import { acquireDataDirLock } from '../store/lock'
import { prepareDataDir } from '../store/data-dir'
import { DEFAULT_TOKEN_TTL, parseDuration } from '../auth/tokens'
import { recordEvent } from '../modules/shared/audit'
import { createToken } from '../modules/tokens/service'
import { descriptionFlag } from './usage'
import { initDatabaseCommand } from './database'
import { notShown, printSecretLine, requireStdoutForSecret } from './stdout'

export class AlreadyInitialisedError extends Error {}

export interface InitResult {
  readonly organization_id: string
  readonly token: string
}

/** Whether `init` has run: the vendor organization exists. */
export const isInitialised = (storage: Storage) => storage.exists('organizations', [{ field: 'organization_type', in: ['vendor'] }])

/**
 * The vendor's id while the storage holds nothing but what its initialisation made, unchanged (one
 * organization and one token, neither changed since: not the vendor's description, not the token's
 * state), else undefined. The first token is printed once it is durable: a first start stopped in
 * between (a kill, a container stop) leaves a token that was never shown, and nothing else would
 * tell. While nothing has been done since, every start says how to get one (`firstTokenHint`); it
 * cannot know whether the line was seen.
 */
export async function untouchedVendor(storage: Storage): Promise<string | undefined> {
  const [organizations, tokens] = await storage.transaction(async (tx) => Promise.all([tx.count('organizations', [], 2), tx.count('tokens', [], 2)]))
  if (organizations !== 1 || tokens !== 1) return undefined
  const first = { where: [], order: 'asc', page: { number: 1, size: 1 } } as const
  const [vendor, token] = await Promise.all([storage.list({ table: 'organizations', ...first }), storage.list({ table: 'tokens', ...first })])
  const [org, record] = [vendor.items[0], token.items[0]]
  const unchanged = org !== undefined && record !== undefined && org.modified === org.created && record.modified === record.created
  return unchanged ? org.organization_id : undefined
}

/** What an untouched data dir or database (`untouchedVendor`) says at each start; `store` names it as the CLI does. */
export const firstTokenHint = (vendorId: string, store: string) =>
  `nothing has been done here since the first start: if its vendor admin token was never shown (that start was stopped before printing it), issue one with keyward issue-token ${store} --org ${vendorId} --role admin`

/**
 * Initialises storage that has no vendor yet (a data dir, or a database under its migration lock:
 * src/cli/database.ts); `command` (`init` or `serve`) is the events' actor.
 */
export async function initialiseStorage(storage: Storage, vendorDescription: string, command: 'init' | 'serve'): Promise<InitResult> {
  if (await isInitialised(storage)) throw new AlreadyInitialisedError('the data is already initialised')
  const actor = { cli: command }
  return storage.transaction(async (tx) => {
    const vendor = await tx.insert('organizations', {
      organization_id: crypto.randomUUID(),
      parent_id: null,
      organization_type: 'vendor',
      description: vendorDescription,
      state: 'active',
      environments: null,
    })
    recordEvent(tx, actor, 'vendor.init', { target: vendor.organization_id, customerId: null, before: null, after: vendor })
    const { token } = await createToken(tx, { organization: vendor, role: 'admin', ttlSeconds: parseDuration(DEFAULT_TOKEN_TTL)!, description: `first vendor admin token (keyward ${command})` }, actor)
    return { organization_id: vendor.organization_id, token }
  })
}

/** `init` on initialised storage: the error, saying how to get a token if nothing has been done since (`untouchedVendor`). */
export async function alreadyInitialised(storage: Storage, where: string, store: string): Promise<AlreadyInitialisedError> {
  const vendor = await untouchedVendor(storage)
  return new AlreadyInitialisedError(`${where} is already initialised${vendor === undefined ? '' : `; ${firstTokenHint(vendor, store)}`}`)
}

export async function initCommand(options: { data: string; databaseUrl?: string | undefined; vendorDescription: string }): Promise<number> {
  // The API's rule for a description (an organization's, here), so that the vendor's can be sent back unchanged.
  const description = descriptionFlag('--vendor-description', options.vendorDescription.trim())
  requireStdoutForSecret('the vendor admin token', 'nothing was initialised')
  if (options.databaseUrl) return initDatabaseCommand(options.databaseUrl, description)
  await prepareDataDir(options.data)
  const lock = acquireDataDirLock(options.data)
  try {
    const storage = new EmbeddedStorage(await Store.open(options.data))
    try {
      const result = await initialiseStorage(storage, description, 'init').catch(async (error) => {
        throw error instanceof AlreadyInitialisedError ? await alreadyInitialised(storage, `data dir ${options.data}`, `--data ${options.data}`) : error
      })
      printSecretLine(JSON.stringify(result) + '\n', notShown(result.organization_id, `--data ${options.data}`))
    } finally {
      await storage.close()
    }
  } finally {
    lock.release()
  }
  return 0
}
