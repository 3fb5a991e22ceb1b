/**
 * `keyward init`, and the first-run initialisation of `serve`: the vendor organization, the
 * signing secret, and a vendor admin token printed once.
 */
import { Store } from '../store/store'
import { nowMicros } from '../store/clock'
import { createSecret, readSecret } from '../auth/secret'
import { mintToken } from '../auth/tokens'
import { acquireDataDirLock } from '../store/lock'
import { prepareDataDir } from '../store/data-dir'
import { UsageError } from './usage'

export const DEFAULT_TOKEN_TTL_SECONDS = 90 * 86400

export class AlreadyInitialisedError extends Error {}

export interface InitResult {
  readonly organization_id: string
  readonly token: string
}

/** Initialises an open store whose dir has no vendor yet. The secret comes first: a crash between the two is repaired by running init again. */
export async function initialiseStore(store: Store, vendorDescription: string): Promise<InitResult> {
  if (store.initialised) throw new AlreadyInitialisedError(`data dir ${store.dir} is already initialised`)
  const secret = (await readSecret(store.dir)) ?? (await createSecret(store.dir))
  const now = nowMicros()
  const vendor = await store.commit((tx) =>
    tx.put('organizations', {
      organization_id: crypto.randomUUID(),
      parent_id: null,
      organization_type: 'vendor',
      description: vendorDescription,
      state: 'active',
      environments: null,
      created: now,
      modified: now,
    }),
  )
  const token = mintToken(secret, { org: vendor.organization_id, role: 'admin', exp: Math.floor(Date.now() / 1000) + DEFAULT_TOKEN_TTL_SECONDS })
  return { organization_id: vendor.organization_id, token }
}

export async function initCommand(options: { data: string; vendorDescription: string }): Promise<number> {
  const description = options.vendorDescription.trim()
  if (description.length === 0 || description.length > 1024) throw new UsageError('--vendor-description must be 1 to 1024 characters')
  await prepareDataDir(options.data)
  const lock = acquireDataDirLock(options.data)
  try {
    const store = await Store.open(options.data)
    try {
      const result = await initialiseStore(store, description)
      process.stdout.write(JSON.stringify(result) + '\n')
    } finally {
      await store.close()
    }
  } finally {
    lock.release()
  }
  return 0
}
