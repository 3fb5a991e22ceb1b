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
      const result = await initialiseStorage(storage, description, 'init').catch((error) => {
        throw error instanceof AlreadyInitialisedError ? new AlreadyInitialisedError(`data dir ${options.data} is already initialised`) : error
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
