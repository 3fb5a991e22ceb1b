/**
 * The data format version of a data dir, kept in its file `format` (one line: the number), and the
 * upgrade of older formats. README "Versions and upgrades" lists the formats:
 *
 *   1  keyward 0.1.0 as first released: log segments end at their last record (an empty segment is
 *      an empty file); the secret is 64 hex digits without a checksum.
 *   2  log segments padded with zeros, so a file cut short is told from a torn write
 *      (log-format.ts); the secret carries a CRC-32. Written by later 0.1.0 builds without a
 *      `format` file, and by 0.2.0 builds before recorded tokens with one. The tokens and audit
 *      branch before its merge (620fd92 to a9484f7) wrote format 3's tables in a dir without a
 *      `format` file: told 2 here, and read right, since 2, 3 and 4 are read by the same code.
 *   3  recorded tokens and audit events (tables `tokens` and `audit_events`, and the log's `drops`
 *      of retention); no `secret` (one left by an older format is ignored). Nothing of format 2
 *      changes meaning, so a format 2 dir is read as it is and only labelled 3; an older keyward
 *      must not open a format 3 dir, which would lose its tokens and events.
 *   4  the snapshot holds the audit events in their in-memory encoding (the dictionary, then the
 *      events' bytes, as base64 lines: audit-table.ts `CapturedAuditEvents`, docs/storage.md)
 *      instead of a JSON record each. A snapshot may still hold them as records, so a format 3 dir
 *      is read as it is and only labelled 4 (its next snapshot is written encoded); an older
 *      keyward must not open a format 4 dir, which it would read as damaged. Its log holds audit
 *      events as rows of values, a create's without the changes replay rebuilds from the created
 *      record (log-record.ts); the events of a format 3 log, JSON records, are replayed as they are.
 *
 * Records of either may hold fields no longer stored (an enrollment's `nickname`): reading drops
 * them (tables.ts).
 *
 * A dir without a `format` file was written before it existed: its format is told from its files
 * (`detectFormat`). Opening such a dir for writing labels it, after rewriting a format 1 dir in the
 * current format. A dir of a newer format than this program reads is refused.
 */
import { open, readFile, rename, rm, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { VERSION } from '../version'
import type { Tables } from './tables'
import { snapshotOf } from './tables-snapshot'
import { fsyncDir, isErrnoCode } from './fs-util'
import { SNAPSHOT_FILE } from './paths'
import { RecoveryDamageError, type Recovered } from './recovery'
import { writeSnapshot } from './snapshot-file'
import { listSegments, removeSegmentsBefore, SEGMENT_GROWTH_BYTES } from './wal'

/** The format this program writes. */
export const DATA_FORMAT = 4
export const FORMAT_FILE = 'format'

/** Whether the format pads its log segments (format 2 on, see the list above); recovery reads them by that. */
export const hasPaddedLog = (format: DataFormat) => format.version >= 2

export interface DataFormat {
  readonly version: number
  /**
   * `file`: named by the `format` file; `detected`: told from the files of a dir written before the
   * `format` file; `new`: a dir with no data yet, which is written in the current format.
   */
  readonly source: 'file' | 'detected' | 'new'
}

/** Data written by a newer keyward: reading it could misread it, and writing could damage it. */
export class NewerDataFormatError extends Error {
  /** `holder`: what holds the data, like "data dir ./data". */
  constructor(holder: string, found: number) {
    super(
      `${holder} is in data format ${found}, newer than keyward ${VERSION} reads (data format ${DATA_FORMAT} and older): ` +
        'run the keyward that wrote it, or a newer one',
    )
    this.name = 'NewerDataFormatError'
  }
}

/** The dir's format; rejects with NewerDataFormatError, or a RecoveryDamageError for an unreadable `format` file. */
export async function readDataFormat(dir: string): Promise<DataFormat> {
  const path = join(dir, FORMAT_FILE)
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return detectFormat(dir)
    throw error
  }
  return { version: parseDataFormat(text, path, `data dir ${dir}`), source: 'file' }
}

/** The text of a `format` file: the version and a newline. */
export const FORMAT_FILE_TEXT = `${DATA_FORMAT}\n`

/** The version a `format` file's text names (the file at `path`, in `holder`); refuses a newer one. */
export function parseDataFormat(text: string, path: string, holder: string): number {
  const match = /^([1-9][0-9]{0,8})\n?$/.exec(text)
  if (!match) throw new RecoveryDamageError(path, 0, 'not a data format version (one line holding a number)')
  const version = Number(match[1])
  if (version > DATA_FORMAT) throw new NewerDataFormatError(holder, version)
  return version
}

/**
 * The format of a dir without a `format` file (written before it existed, format 1 or 2). Format 2
 * pads its log segments: a whole number of growth steps long, ending in zeros. Format 1 is assumed
 * when no segment is padded; a dir without segments is read alike by both (they differ only in the
 * log), so guessing 1 for it costs only the rewrite of its snapshot. The `secret` of those formats
 * is not looked at: it is ignored now (README "Tokens").
 */
async function detectFormat(dir: string): Promise<DataFormat> {
  const segments = await listSegments(dir)
  if (segments.length === 0 && !(await exists(join(dir, SNAPSHOT_FILE)))) return { version: DATA_FORMAT, source: 'new' }
  for (const segment of segments) {
    if (await isPadded(segment.path)) return { version: 2, source: 'detected' }
  }
  return { version: 1, source: 'detected' }
}

async function isPadded(path: string): Promise<boolean> {
  const file = await open(path, 'r')
  try {
    const { size } = await file.stat()
    if (size === 0 || size % SEGMENT_GROWTH_BYTES !== 0) return false
    const last = Buffer.alloc(1)
    await file.read(last, 0, 1, size - 1)
    return last[0] === 0
  } finally {
    await file.close()
  }
}

/**
 * Brings a dir being opened for writing, already recovered into `tables`, to the current format and
 * labels it. Format 1: everything is written as one snapshot and the unpadded segments are deleted
 * (the log writer then starts a padded one). In that order, and the label last: a crash at any point
 * leaves a dir that is still read as format 1 (at worst without segments) and upgraded again.
 * Formats 2 and 3: only the label changes (see the list above).
 */
export async function upgradeDataDir(dir: string, format: DataFormat, tables: Tables, recovered: Recovered): Promise<Recovered> {
  if (format.source === 'file' && format.version === DATA_FORMAT) return recovered
  if (format.version === 1) {
    await writeSnapshot(join(dir, SNAPSHOT_FILE), snapshotOf(tables, recovered.lastLsn))
    await removeSegmentsBefore(dir, Infinity) // every one: all their records are in the snapshot
    const { lastSegment: _rewritten, ...rest } = recovered
    recovered = { ...rest, snapshotLsn: recovered.lastLsn }
  }
  await writeDataFormat(dir)
  return recovered
}

/** Writes the `format` file of the current format: whole under a temporary name, fsynced, renamed, mode 0600. */
export async function writeDataFormat(dir: string): Promise<void> {
  const path = join(dir, FORMAT_FILE)
  const temporary = `${path}.tmp`
  await rm(temporary, { force: true }) // left over from a crash
  const file = await open(temporary, 'wx', 0o600)
  try {
    await file.writeFile(FORMAT_FILE_TEXT)
    await file.sync()
  } finally {
    await file.close()
  }
  await rename(temporary, path)
  await fsyncDir(dir)
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    (error) => (isErrnoCode(error, 'ENOENT') ? false : Promise.reject(error)),
  )
}
