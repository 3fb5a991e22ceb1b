/**
 * `keyward verify [--data DIR]`: reads every file of a data dir and checks every checksum, without
 * the lock and without writing, so it also runs beside a server (README "Backup, restore, verify").
 * Intact: exit 0 and a summary on stdout. Damaged: exit 1 naming the file and the offset of the first
 * damage, in the order a start reads them: `format`, the snapshot, the log segments, `secret`.
 */
import { readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { readSecret } from '../auth/secret'
import { TABLE_NAMES, type Tables } from '../store/database'
import { DATA_FORMAT } from '../store/format'
import { isErrnoCode } from '../store/fs-util'
import { SECRET_FILE } from '../store/paths'
import { readDataDir, type DataDirContents } from '../store/read-only'
import { isDamageError, RecoveryDamageError } from '../store/recovery'

export interface CheckedDataDir extends DataDirContents {
  /** The `secret` file as it is on disk. */
  readonly secretFile: Buffer
}

/** Every file of an initialised data dir read and checked; throws naming the first damage. */
export async function checkDataDir(dir: string): Promise<CheckedDataDir> {
  const info = await stat(dir).catch((error) => (isErrnoCode(error, 'ENOENT') ? null : Promise.reject(error)))
  if (!info?.isDirectory()) throw new Error(`data dir ${dir} does not exist`)
  try {
    const contents = await readDataDir(dir)
    const secretPath = join(dir, SECRET_FILE)
    const secret = await readSecret(dir)
    if (contents.tables.organizations.size === 0) throw new Error(`data dir ${dir} holds no keyward data: it is not initialised`)
    if (!secret) throw new RecoveryDamageError(secretPath, 0, 'missing: the token-signing secret of an initialised data dir')
    return { ...contents, secretFile: await readFile(secretPath) }
  } catch (error) {
    if (isDamageError(error)) throw new Error(`data dir ${dir} is damaged: ${error.message}`)
    throw error
  }
}

export async function verifyCommand(options: { data: string }): Promise<number> {
  // In database mode (a later change) verify checks the schema version instead (CONTRACT section 11).
  const checked = await checkDataDir(options.data)
  process.stdout.write([`keyward: data dir ${options.data} is intact`, ...describeContents(checked)].join('\n') + '\n')
  return 0
}

/** What a checked dir holds, a line each: format, log position, records per table, and a torn last write. */
export function describeContents({ format, tables, recovered }: DataDirContents): string[] {
  const formatNote =
    format.source !== 'detected' ? '' : format.version < DATA_FORMAT ? ` (no format file; upgraded to ${DATA_FORMAT} when next served)` : ' (no format file; labelled when next served)'
  const afterSnapshot = recovered.lastLsn - recovered.snapshotLsn
  const lines = [
    `data format: ${format.version}${formatNote}`,
    `log position: ${recovered.lastLsn} (snapshot at ${recovered.snapshotLsn}, then ${afterSnapshot} log record${afterSnapshot === 1 ? '' : 's'})`,
    recordCounts(tables),
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

export const recordCounts = (tables: Tables) => `records: ${TABLE_NAMES.map((name) => `${name} ${tables[name].size}`).join(', ')}`
