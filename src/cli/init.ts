/**
 * `keyward init`, and the first-run initialisation of `serve`: the vendor organization, the
 * signing secret, and a vendor admin token printed once.
 */
import { Store } from '../store/store'
import { EmbeddedStorage } from '../storage/embedded'
import type { Storage } from '../storage/storage'
import { createSecret, readSecret } from '../auth/secret'
import { mintToken } from '../auth/tokens'
import { acquireDataDirLock } from '../store/lock'
import { prepareDataDir } from '../store/data-dir'
import { UsageError } from './usage'
import { initDatabaseCommand } from './database'

export const DEFAULT_TOKEN_TTL_SECONDS = 90 * 86400

export class AlreadyInitialisedError extends Error {}

export interface InitResult {
  readonly organization_id: string
  readonly token: string
}

/** Whether `init` has run: the vendor organization exists. */
export const isInitialised = (storage: Storage) => storage.exists('organizations', [{ field: 'organization_type', in: ['vendor'] }])

/**
 * Initialises storage that has no vendor yet, the signing secret of `dir` first: a crash between
 * the two is repaired by running init again.
 */
export async function initialiseStorage(storage: Storage, dir: string, vendorDescription: string): Promise<InitResult> {
  if (await isInitialised(storage)) throw new AlreadyInitialisedError(`data dir ${dir} is already initialised`)
  const secret = (await readSecret(dir)) ?? (await createSecret(dir))
  return createVendor(storage, secret, vendorDescription)
}

/** The vendor organization and its first admin token, signed with `secret`. */
export async function createVendor(storage: Storage, secret: Buffer, vendorDescription: string): Promise<InitResult> {
  const vendor = await storage.transaction((tx) =>
    tx.insert('organizations', {
      organization_id: crypto.randomUUID(),
      parent_id: null,
      organization_type: 'vendor',
      description: vendorDescription,
      state: 'active',
      environments: null,
    }),
  )
  const token = mintToken(secret, { org: vendor.organization_id, role: 'admin', exp: Math.floor(Date.now() / 1000) + DEFAULT_TOKEN_TTL_SECONDS })
  return { organization_id: vendor.organization_id, token }
}

export async function initCommand(options: { data: string; databaseUrl?: string | undefined; vendorDescription: string }): Promise<number> {
  const description = options.vendorDescription.trim()
  if (description.length === 0 || description.length > 1024) throw new UsageError('--vendor-description must be 1 to 1024 characters')
  if (options.databaseUrl) return initDatabaseCommand(options.databaseUrl, description)
  await prepareDataDir(options.data)
  const lock = acquireDataDirLock(options.data)
  try {
    const storage = new EmbeddedStorage(await Store.open(options.data))
    try {
      const result = await initialiseStorage(storage, options.data, description)
      process.stdout.write(JSON.stringify(result) + '\n')
    } finally {
      await storage.close()
    }
  } finally {
    lock.release()
  }
  return 0
}
