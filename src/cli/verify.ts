/**
 * `keyward verify [--data DIR]`: reads every file of a data dir and checks every checksum, without
 * the lock and without writing, so it also runs beside a server (README "Backup, restore, verify").
 * Intact: exit 0 and a summary on stdout. Damaged: exit 1 naming the file and the offset of the first
 * damage, in the order a start reads them: `format`, the snapshot, the log segments. A `secret` file
 * left by a version with signed tokens is not keyward's any more and is not read.
 *
 * With `--database-url`: the database's schema version is checked (docs/operations.md; its data is
 * the database's to check).
 */
import { printOutput } from './stdout'
import { TABLE_NAMES } from '../storage/records'
import type { Tables } from '../store/tables'
import { DATA_FORMAT } from '../store/format'
import { requireKeywardDataDir } from '../store/data-dir'
import { readDataDir, type DataDirContents } from '../store/read-only'
import { isDamageError } from '../store/recovery'
import { SCHEMA_VERSION, SchemaTooNewError } from '../storage/postgres/schema'
import { describeDatabase, withDatabase } from './database'
import { withoutSecrets } from '../ops/redact'

/** Every file of an initialised data dir read and checked; throws naming the first damage. */
export async function checkDataDir(dir: string): Promise<DataDirContents> {
  await requireKeywardDataDir(dir)
  try {
    const contents = await readDataDir(dir)
    if (contents.tables.organizations.size === 0) throw new Error(`data dir ${dir} holds no keyward data: it is not initialised`)
    return contents
  } catch (error) {
    if (isDamageError(error)) throw new Error(`data dir ${dir} is damaged: ${error.message}`)
    throw error
  }
}

/** The schema version of the database at `url`: exit 0 when it is this keyward's, else exit 1 naming both. */
async function verifyDatabase(url: string): Promise<number> {
  const where = describeDatabase(url)
  const found = await withDatabase(url, (storage) => storage.schemaVersion())
  if (found > SCHEMA_VERSION) throw new SchemaTooNewError(found)
  if (found === 0) throw new Error(`${where} holds no keyward schema: it is not initialised`)
  if (found < SCHEMA_VERSION) {
    throw new Error(`${where} has schema version ${found}, older than this keyward's (version ${SCHEMA_VERSION}): run 'keyward serve' on it to migrate it`)
  }
  printOutput(`keyward: ${where} has schema version ${found}, this keyward's\n`)
  return 0
}

export async function verifyCommand(options: { data: string; databaseUrl?: string | undefined }): Promise<number> {
  if (options.databaseUrl) return verifyDatabase(options.databaseUrl)
  const checked = await checkDataDir(options.data)
  printOutput(withoutSecrets([`keyward: data dir ${options.data} is intact`, ...describeContents(checked)].join('\n') + '\n'))
  return 0
}

/** What a checked dir holds, a line each: format, log position, records per table, and a torn last write. */
export function describeContents({ format, tables, recovered }: DataDirContents): string[] {
  const noFile = format.source === 'detected' ? 'no format file; ' : ''
  const formatNote =
    format.version < DATA_FORMAT ? ` (${noFile}upgraded to ${DATA_FORMAT} when next served)` : noFile ? ' (no format file; labelled when next served)' : ''
  const afterSnapshot = recovered.lastLsn - recovered.snapshotLsn
  const lines = [
    `data format: ${format.version}${formatNote}`,
    `log position: ${recovered.lastLsn} (snapshot at ${recovered.snapshotLsn}, then ${afterSnapshot} log record${afterSnapshot === 1 ? '' : 's'})`,
    recordCounts(tables),
    // The id an upgrade's first `issue-token` needs (README "Tokens"): tokens of format 1 and 2 had no records to find it by.
    `vendor organization: ${vendorOf(tables) ?? 'none'}`,
  ]
  const torn = recovered.tornTail
  if (torn) {
    lines.push(
      `note: ${torn.path}: an incomplete last record at offset ${torn.offset} (${torn.bytes} bytes): a write in progress, ` +
        'or one a crash cut off before it was acknowledged; dropped when next served',
    )
  }
  return lines
}

/** The vendor organization's id: the first organization made (by `init`), found without a scan. */
function vendorOf(tables: Tables): string | undefined {
  for (const organization of tables.organizations.values()) if (organization.organization_type === 'vendor') return organization.organization_id
  return undefined
}

export const recordCounts = (tables: Tables) => `records: ${TABLE_NAMES.map((name) => `${name} ${tables[name].size}`).join(', ')}`
