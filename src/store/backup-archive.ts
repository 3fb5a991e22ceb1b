/**
 * The backup archive (README "Backup, restore, verify"): one POSIX tar file (ustar) of the files of a
 * data dir, then `SHA256SUMS`, their SHA-256 checksums in the format of `sha256sum`. Any tar can list
 * and unpack it, and `sha256sum -c SHA256SUMS` checks what it unpacked; `keyward restore` checks every
 * checksum before it writes anything.
 *
 * Only plain files at the top level, each under 8 GiB (the 11 octal digits of a ustar size field).
 * Written and read a block at a time: a snapshot of any size never has to fit in memory.
 */
import { createHash } from 'node:crypto'
import { open, type FileHandle } from 'node:fs/promises'
import { readExactly } from './fs-util'

export const CHECKSUMS_FILE = 'SHA256SUMS'

const BLOCK = 512
const CHUNK = 1024 * 1024
/** 11 octal digits. */
const MAX_MEMBER_BYTES = 8 ** 11 - 1
/** The checksum list is a line per file: anything longer is not one keyward wrote. */
const MAX_CHECKSUMS_BYTES = 64 * 1024

/** The archive is not one `keyward backup` wrote, or not as it wrote it. */
export class ArchiveDamageError extends Error {
  constructor(file: string, offset: number, reason: string) {
    super(`${file}: damaged backup archive at offset ${offset}: ${reason}`)
    this.name = 'ArchiveDamageError'
  }
}

/** A file to put in the archive: its bytes, or a file to copy them from. */
export type ArchiveSource = { readonly name: string } & ({ readonly bytes: Uint8Array } | { readonly path: string })

/** Writes the members, then SHA256SUMS, then the end of the archive, to `out` (an open, empty file). */
export async function writeArchive(out: FileHandle, members: readonly ArchiveSource[]): Promise<void> {
  const sums: string[] = []
  let position = 0
  const write = async (bytes: Uint8Array) => {
    await writeAll(out, bytes, position)
    position += bytes.length
  }
  const writeMember = async (name: string, size: number, content: (emit: (chunk: Uint8Array) => Promise<void>) => Promise<void>) => {
    if (size > MAX_MEMBER_BYTES) throw new RangeError(`${name} is ${size} bytes, more than a backup archive holds (8 GiB)`)
    await write(header(name, size))
    const hash = createHash('sha256')
    let written = 0
    await content(async (chunk) => {
      hash.update(chunk)
      written += chunk.length
      await write(chunk)
    })
    if (written !== size) throw new Error(`${name} changed size while it was archived`)
    await write(new Uint8Array(padding(size)))
    sums.push(`${hash.digest('hex')}  ${name}\n`)
  }

  for (const member of members) {
    if ('bytes' in member) {
      await writeMember(member.name, member.bytes.length, (emit) => emit(member.bytes))
      continue
    }
    const source = await open(member.path, 'r')
    try {
      const { size } = await source.stat()
      await writeMember(member.name, size, (emit) => readChunks(source, 0, size, emit))
    } finally {
      await source.close()
    }
  }
  const checksums = Buffer.from(sums.join(''))
  await writeMember(CHECKSUMS_FILE, checksums.length, (emit) => emit(checksums))
  await write(new Uint8Array(2 * BLOCK)) // the end of a tar archive
}

export interface ArchiveMember {
  readonly name: string
  /** Where its bytes start in the archive file. */
  readonly offset: number
  readonly size: number
}

/**
 * Reads the whole archive and checks it: every header, every member against SHA256SUMS, nothing
 * missing, nothing extra, only the names in `allowed`. Returns the members (without SHA256SUMS).
 */
export async function checkArchive(path: string, allowed: readonly string[]): Promise<ArchiveMember[]> {
  const file = await open(path, 'r')
  try {
    const { size: fileSize } = await file.stat()
    const members: (ArchiveMember & { sha256: string })[] = []
    let checksums: string | undefined
    let offset = 0
    const block = Buffer.alloc(BLOCK)
    for (;;) {
      if (offset + BLOCK > fileSize) throw new ArchiveDamageError(path, offset, 'the archive ends before its end marker')
      await readExactly(file, block, offset)
      if (block.every((byte) => byte === 0)) break // the end marker
      const { name, size } = parseHeader(block, path, offset)
      const start = offset + BLOCK
      if (start + size > fileSize) throw new ArchiveDamageError(path, offset, `${name} is cut off by the end of the archive`)
      if (name === CHECKSUMS_FILE) {
        if (checksums !== undefined || size > MAX_CHECKSUMS_BYTES) throw new ArchiveDamageError(path, offset, `unexpected ${name}`)
        const bytes = Buffer.alloc(size)
        await readExactly(file, bytes, start)
        checksums = bytes.toString('utf8')
      } else {
        if (!allowed.includes(name) || members.some((m) => m.name === name)) throw new ArchiveDamageError(path, offset, `unexpected file ${JSON.stringify(name)}`)
        members.push({ name, offset: start, size, sha256: await sha256Of(file, start, size) })
      }
      offset = start + size + padding(size)
    }
    if (checksums === undefined) throw new ArchiveDamageError(path, offset, `no ${CHECKSUMS_FILE}`)
    const listed = parseChecksums(checksums, path)
    for (const member of members) {
      const expected = listed.get(member.name)
      if (expected === undefined) throw new ArchiveDamageError(path, member.offset, `${member.name} is not in ${CHECKSUMS_FILE}`)
      if (expected !== member.sha256) throw new ArchiveDamageError(path, member.offset, `${member.name} does not match its checksum`)
      listed.delete(member.name)
    }
    const [missing] = listed.keys()
    if (missing !== undefined) throw new ArchiveDamageError(path, offset, `${missing} is listed in ${CHECKSUMS_FILE} but missing`)
    return members.map(({ name, offset, size }) => ({ name, offset, size }))
  } finally {
    await file.close()
  }
}

/** Copies a member's bytes (checked by checkArchive) into `to`. */
export async function copyMember(archive: string, member: ArchiveMember, to: FileHandle): Promise<void> {
  const file = await open(archive, 'r')
  try {
    let position = 0
    await readChunks(file, member.offset, member.size, async (chunk) => {
      await writeAll(to, chunk, position)
      position += chunk.length
    })
  } finally {
    await file.close()
  }
}

/** A small member's bytes (checked by checkArchive): at most `maxBytes`, else it is not what it should be. */
export async function readMember(archive: string, member: ArchiveMember, maxBytes: number): Promise<Buffer> {
  if (member.size > maxBytes) throw new ArchiveDamageError(archive, member.offset, `${member.name} is longer than ${maxBytes} bytes`)
  const file = await open(archive, 'r')
  try {
    const bytes = Buffer.alloc(member.size)
    await readExactly(file, bytes, member.offset)
    return bytes
  } finally {
    await file.close()
  }
}

// ---------------------------------------------------------------------------------------------
// ustar headers

function header(name: string, size: number): Uint8Array {
  const bytes = Buffer.alloc(BLOCK)
  if (Buffer.byteLength(name) > 100) throw new RangeError(`file name too long for a tar header: ${name}`)
  bytes.write(name, 0)
  bytes.write('0000600\0', 100) // mode
  bytes.write('0000000\0', 108) // uid
  bytes.write('0000000\0', 116) // gid
  bytes.write(`${size.toString(8).padStart(11, '0')}\0`, 124)
  bytes.write(`${Math.floor(Date.now() / 1000).toString(8).padStart(11, '0')}\0`, 136) // mtime
  bytes.write('0', 156) // a regular file
  bytes.write('ustar\0' + '00', 257)
  bytes.write(`${headerChecksum(bytes).toString(8).padStart(6, '0')}\0 `, 148)
  return bytes
}

/** The sum of the header's bytes, its checksum field counted as spaces. */
function headerChecksum(block: Uint8Array): number {
  let sum = 0
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i]!
  return sum
}

function parseHeader(block: Buffer, path: string, offset: number): { name: string; size: number } {
  const field = (start: number, length: number) => {
    const raw = block.subarray(start, start + length)
    const end = raw.indexOf(0)
    return raw.subarray(0, end === -1 ? length : end).toString('latin1')
  }
  const octal = (start: number, length: number) => {
    const text = field(start, length).trim()
    return /^[0-7]{1,11}$/.test(text) ? parseInt(text, 8) : NaN
  }
  if (octal(148, 8) !== headerChecksum(block)) throw new ArchiveDamageError(path, offset, 'tar header checksum mismatch')
  if (field(257, 6) !== 'ustar') throw new ArchiveDamageError(path, offset, 'not a ustar header')
  const type = field(156, 1)
  if (type !== '0' && type !== '') throw new ArchiveDamageError(path, offset, 'not a plain file')
  const size = octal(124, 12)
  if (!Number.isSafeInteger(size)) throw new ArchiveDamageError(path, offset, 'unreadable file size')
  return { name: field(0, 100), size }
}

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK

function parseChecksums(text: string, path: string): Map<string, string> {
  const sums = new Map<string, string>()
  for (const line of text.split('\n')) {
    if (line === '') continue
    const match = /^([0-9a-f]{64}) [ *](\S+)$/.exec(line)
    if (!match || sums.has(match[2]!)) throw new ArchiveDamageError(path, 0, `unreadable ${CHECKSUMS_FILE} line ${JSON.stringify(line)}`)
    sums.set(match[2]!, match[1]!)
  }
  return sums
}

async function sha256Of(file: FileHandle, start: number, size: number): Promise<string> {
  const hash = createHash('sha256')
  await readChunks(file, start, size, (chunk) => void hash.update(chunk))
  return hash.digest('hex')
}

/** Hands bytes [start, start + size) of `file` to `use` a chunk at a time (one buffer, reused). */
async function readChunks(file: FileHandle, start: number, size: number, use: (chunk: Uint8Array) => Promise<void> | void): Promise<void> {
  const buffer = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(size, 1)))
  for (let done = 0; done < size; ) {
    const chunk = buffer.subarray(0, Math.min(buffer.length, size - done))
    await readExactly(file, chunk, start + done)
    await use(chunk)
    done += chunk.length
  }
}

async function writeAll(file: FileHandle, bytes: Uint8Array, position: number): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await file.write(bytes, done, bytes.length - done, position + done)
    done += bytesWritten
  }
}
