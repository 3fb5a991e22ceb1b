/**
 * Every file keyward writes is made durable before it is relied on: the file synced, and its
 * directory synced once the file is created, renamed into place or removed (docs/storage.md,
 * "What each implementation promises"). Counted here, in order, for each operation that writes
 * files: a missing sync loses nothing in a test, only on a power cut, so nothing else would notice.
 */
import { afterAll, beforeAll, expect, spyOn, test } from 'bun:test'
import { open, rm } from 'node:fs/promises'
import { join } from 'node:path'
import * as fsUtil from '../../src/store/fs-util'
import { Store } from '../../src/store/store'
import { backupCommand } from '../../src/cli/backup'
import { restoreCommand } from '../../src/cli/restore'
import { tempDir } from '../support/temp-dirs'

const root = tempDir('keyward-durability-')
/** What was made durable since the last `taken()`: `file` (a file's sync), or `dir <path under root>`. */
let synced: string[] = []
const taken = () => synced.splice(0)

beforeAll(async () => {
  const syncDir = fsUtil.fsyncDir
  let inDirSync = 0
  spyOn(fsUtil, 'fsyncDir').mockImplementation(async (dir: string) => {
    synced.push(`dir ${dir.slice(root.length).replace(/\.keyward-backup-[^/]+/, '.keyward-backup-*') || '/'}`)
    inDirSync++
    try {
      return await syncDir(dir)
    } finally {
      inDirSync--
    }
  })
  // Every FileHandle's sync, but for the one fsyncDir makes of a directory.
  const handle = await open(join(root, 'probe'), 'w')
  const prototype = Object.getPrototypeOf(handle) as { sync(): Promise<void> }
  await handle.close()
  const syncFile = prototype.sync
  spyOn(prototype, 'sync').mockImplementation(function (this: unknown) {
    if (inDirSync === 0) synced.push('file')
    return syncFile.call(this)
  })
})
afterAll(() => rm(root, { recursive: true, force: true }))

/** Runs a CLI command's function without its line on stdout. */
async function quietly(command: () => Promise<unknown>): Promise<void> {
  const write = process.stdout.write
  process.stdout.write = () => true
  try {
    await command()
  } finally {
    process.stdout.write = write
  }
}

test('the data dir, its snapshots and log segments, backups and restores: each file synced, then its directory', async () => {
  const data = join(root, 'data')
  const store = await Store.open(data, { log: () => {} })
  // The `format` file, then the first log segment: each written under a temporary name, synced, renamed.
  expect(taken()).toEqual(['file', 'dir /data', 'file', 'dir /data'])
  const now = Date.now() * 1000
  await store.commit((tx) =>
    tx.put('organizations', { organization_id: crypto.randomUUID(), parent_id: null, organization_type: 'vendor', description: 'Vendor', state: 'active', environments: null, created: now, modified: now }),
  )
  expect(taken()).toEqual([]) // the log's records are made durable by fdatasync (counted in store.test.ts)
  await store.compact()
  // The snapshot, a new log segment, and the segments it covers removed.
  expect(taken()).toEqual(['file', 'dir /data', 'file', 'dir /data', 'dir /data'])
  await store.close()
  expect(taken()).toEqual([]) // the snapshot on disk is current

  await quietly(() => backupCommand({ data, out: join(root, 'backup.tar') }))
  // A snapshot staged in a private directory beside the archive, then the archive: synced, renamed into place.
  expect(taken()).toEqual(['file', 'dir /.keyward-backup-*', 'file', 'dir /'])
  await quietly(() => restoreCommand({ from: join(root, 'backup.tar'), data: join(root, 'restored') }))
  // Its two files, then the directory that now holds them.
  expect(taken()).toEqual(['file', 'file', 'dir /restored'])
})
