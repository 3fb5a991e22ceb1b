/**
 * Start-up: load the snapshot, replay the log segments over it. Log records are full images of the
 * records they change (audit events as rows, turned back into records first: log-record.ts), so
 * replaying one the snapshot already holds is harmless; records at or below
 * the snapshot's LSN are skipped anyway, and a gap in the LSN sequence (a lost segment, a lost
 * snapshot) is damage, never silently accepted.
 */
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import type { Tables } from './tables'
import type { Table } from './table'
import { LOG_HEADER_BYTES, LogDamageError, readLogFile } from './log-format'
import { SnapshotDamageError, SnapshotLineError, scanSnapshot } from './snapshot-file'
import { listSegments, zeroRange, type Segment } from './wal'
import { SNAPSHOT_FILE } from './paths'
import { restoreEvents, type LogEntry } from './log-record'

/** Refused data: the message names the file and the byte offset. */
export class RecoveryDamageError extends Error {
  constructor(
    readonly file: string,
    readonly offset: number,
    reason: string,
  ) {
    super(`${file}: damaged at offset ${offset}: ${reason}`)
    this.name = 'RecoveryDamageError'
  }
}

export function isDamageError(error: unknown): error is Error & { file: string; offset: number } {
  return error instanceof RecoveryDamageError || error instanceof LogDamageError || error instanceof SnapshotDamageError
}

export interface Recovered {
  readonly lastLsn: number
  /** LSN covered by the snapshot loaded (0 without one). */
  readonly snapshotLsn: number
  /** Newest `created`/`modified` seen, so the clock never goes back across a restart. */
  readonly newestTimestamp: number
  /** Where appends continue, when repairing. */
  readonly lastSegment?: { segment: Segment; end: number }
  /** An incomplete last record in the newest segment (zeroed when repairing): a write never acknowledged. */
  readonly tornTail?: { path: string; offset: number; bytes: number }
}

export async function recover(
  dir: string,
  tables: Tables,
  /** `paddedLog`: the dir's data format pads its log segments (format.ts, log-format.ts). */
  options: { repair: boolean; warn: (message: string) => void; paddedLog: boolean },
): Promise<Recovered> {
  let newest = 0
  const tableNamed = (name: string) => {
    if (!Object.hasOwn(tables, name)) return undefined // not `in`: "constructor" is no table
    return (tables as unknown as Record<string, Table<unknown>>)[name]!
  }
  const seen = (record: Record<string, unknown>) => {
    newest = Math.max(newest, Number(record.modified ?? 0), Number(record.created ?? 0))
  }

  // As in the log: a table we do not know is refused, never silently left out.
  const snapshotPath = join(dir, SNAPSHOT_FILE)
  const snapshot = await scanSnapshot(snapshotPath, (name) => {
    const table = tableNamed(name)
    if (!table) throw new RecoveryDamageError(snapshotPath, 0, `unknown table ${name}`)
    return (line) => {
      if (!Array.isArray(line)) {
        table.loadStored(line)
        seen(line)
      } else if (name === 'audit_events') {
        // The encoded events of data format 4 (docs/storage.md "Audit events in memory").
        newest = Math.max(newest, tables.audit_events.loadSnapshotLine(line))
      } else throw new SnapshotLineError(`table ${name} holds only records`)
    }
  })
  let lsn = snapshot?.lsn ?? 0

  const segments = await listSegments(dir)
  let lastSegment: Recovered['lastSegment']
  let tornTail: Recovered['tornTail']
  for (const [i, segment] of segments.entries()) {
    const isLast = i === segments.length - 1
    // A segment is named after its first LSN. Checked before its records, because it may be empty
    // (a clean shutdown leaves one): a lost snapshot or segment before it must still be caught.
    if (segment.firstLsn > lsn + 1) {
      throw new RecoveryDamageError(segment.path, 0, `log records ${lsn + 1}..${segment.firstLsn - 1} are missing`)
    }
    const scan = await readLogFile(segment.path, { padded: options.paddedLog })
    let offset = 0
    for (const payload of scan.payloads) {
      const entry = parseEntry(payload, segment.path, offset)
      if (entry.lsn > lsn) {
        if (entry.lsn !== lsn + 1) {
          throw new RecoveryDamageError(segment.path, offset, `log records ${lsn + 1}..${entry.lsn - 1} are missing`)
        }
        const unrestorable = restoreEvents(entry)
        if (unrestorable) throw new RecoveryDamageError(segment.path, offset, unrestorable)
        for (const [name, record] of entry.puts) {
          const table = tableNamed(name)
          if (!table) throw new RecoveryDamageError(segment.path, offset, `unknown table ${name}`)
          table.putStored(record)
          seen(record)
        }
        for (const [name, ids] of entry.drops ?? []) {
          const table = tableNamed(name)
          if (!table) throw new RecoveryDamageError(segment.path, offset, `unknown table ${name}`)
          table.removeIds(ids)
        }
        lsn = entry.lsn
      }
      offset += LOG_HEADER_BYTES + payload.length
    }
    if (scan.tornTail) {
      if (!isLast) {
        throw new RecoveryDamageError(segment.path, scan.tornTail.offset, 'incomplete record in a log segment that is not the newest')
      }
      tornTail = { path: segment.path, ...scan.tornTail }
      if (options.repair) {
        options.warn(
          `warning: ${segment.path}: dropped an incomplete last record at offset ${scan.tornTail.offset} ` +
            `(${scan.tornTail.bytes} bytes, an interrupted write that was never acknowledged)`,
        )
        await zeroDurably(segment.path, scan.tornTail.offset, scan.tornTail.offset + scan.tornTail.bytes)
      }
    }
    if (isLast) lastSegment = { segment, end: scan.validEnd }
  }
  return {
    lastLsn: lsn,
    snapshotLsn: snapshot?.lsn ?? 0,
    newestTimestamp: newest,
    ...(lastSegment ? { lastSegment } : {}),
    ...(tornTail ? { tornTail } : {}),
  }
}

function parseEntry(payload: Uint8Array, file: string, offset: number): LogEntry {
  try {
    const entry = JSON.parse(Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength).toString('utf8')) as LogEntry
    if (typeof entry.lsn !== 'number' || !Array.isArray(entry.puts) || !(entry.drops === undefined || Array.isArray(entry.drops))) {
      throw new Error('not a log entry')
    }
    return entry
  } catch (error) {
    throw new RecoveryDamageError(file, offset, `unreadable log record (${(error as Error).message})`)
  }
}

/** Zeroed, not truncated: the segment keeps its padding (log-format.ts). */
async function zeroDurably(path: string, start: number, end: number): Promise<void> {
  const file = await open(path, 'r+')
  try {
    await zeroRange(file, start, end)
  } finally {
    await file.close()
  }
}
