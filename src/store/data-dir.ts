/**
 * What keyward accepts as its data dir (README "The data dir"): a real
 * directory (not a symbolic link) owned by the user running keyward, that is either keyward's
 * already or holds nothing but dotfiles. Anything else is refused with a message saying what to fix,
 * before anything in it changes; a directory that is not keyward's is never chmodded.
 */
import { realpathSync as realpathSyncJs } from 'node:fs'
import { constants } from 'node:fs'
import { access, chmod, lstat, mkdir, readdir } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { isErrnoCode, notWritableCode } from './fs-util'
import { LOCK_FILE, ReadOnlyDataDirError } from './lock'
import { SECRET_FILE, SNAPSHOT_FILE } from './paths'

/** A data dir keyward must not use as it is; the message says what to fix. */
export class DataDirError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'DataDirError'
  }
}

/** A data dir of keyward's that its owner may not write in (chmod u-w): read-only commands still read it. */
export class NotWritableDataDirError extends DataDirError {
  constructor(dir: string) {
    super(`data dir ${dir} may not be written by the user running keyward (EACCES): serve, init, restore and the token commands that write make files in it; give its owner write permission (chmod 700 ${dir})`)
  }
}

/** The C library's realpath: the kernel's resolution, `..` after a link included (node's JavaScript one drops `a/..` as text first). */
const realpathSync = (path: string) => realpathSyncJs.native(path)

/**
 * The data dir's path as the kernel resolves it, for every command to use from then on: the
 * directories above it through their links (`a/..` is the parent of where `a` points, not the dir
 * that holds `a`, as a textual `path.resolve` would have it), its own name kept, so that a link there
 * is still refused (`inspectDataDir`). Otherwise the checks, the chmod and the files could each
 * reach another directory. Throws DataDirError for a path that names no directory it can place.
 */
export function canonicalDataDir(raw: string): string {
  // Trailing slashes and `.`s name the dir before them (`link/.` is `link`, refused as a link).
  const trimmed = raw.replace(/(?:\/\.?)+$/, '') || (raw.startsWith('/') ? '/' : '.')
  const slash = trimmed.lastIndexOf('/')
  const name = trimmed.slice(slash + 1)
  // `.`, `..` or `/` name a directory that exists and is no link by its own name (`..` is where the
  // kernel's path leads, a link before it followed, as every command will follow it): its answer.
  if (name === '' || name === '.' || name === '..') return realpathOrMissing(trimmed, raw)
  const parent = slash === -1 ? '.' : slash === 0 ? '/' : trimmed.slice(0, slash)
  return join(existingAncestor(parent, raw), name)
}

/** `path` resolved by the kernel: its longest existing prefix through its links, then the rest as written (no `..` in it). */
function existingAncestor(path: string, raw: string): string {
  const parts = path.split('/')
  for (let n = parts.length; n >= 0; n--) {
    // The whole of it first; at last the start every path has (`/`, or the working directory).
    const prefix = n === 0 ? (path.startsWith('/') ? '/' : '.') : parts.slice(0, n).join('/') || '/'
    let real: string
    try {
      real = realpathSync(prefix)
    } catch (error) {
      if (isErrnoCode(error, 'ENOENT')) continue
      throw unreachable(error, raw)
    }
    const rest = parts.slice(n).filter((part) => part !== '' && part !== '.')
    if (rest.includes('..')) throw new DataDirError(`data dir ${raw}: '..' after a directory that does not exist; give the path without it`)
    return join(real, ...rest)
  }
  throw new DataDirError(`data dir ${raw}: the working directory does not exist`)
}

function realpathOrMissing(path: string, raw: string): string {
  try {
    return realpathSync(path)
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) throw new DataDirError(`data dir ${raw} does not exist`)
    throw unreachable(error, raw)
  }
}

/** A directory on the way to the data dir that this user may not search (EACCES): said so, not as realpath's error. */
function unreachable(error: unknown, raw: string): unknown {
  if (!isErrnoCode(error, 'EACCES')) return error
  return new DataDirError(`data dir ${raw} cannot be reached: a directory on its path may not be searched by this user (EACCES); give the user that runs keyward access to each directory on the path`)
}

/** `missing`: nothing there yet; `unused`: empty or only dotfiles; `keyward`: a data dir of keyward's. */
export type DataDirContents = 'missing' | 'unused' | 'keyward'

/** Files of keyward's data (a `secret` from a version with signed tokens too): one of them makes a dir keyward's. */
const isKeywardData = (name: string) => name === SECRET_FILE || name === SNAPSHOT_FILE || /^wal-.*\.log$/.test(name)

/**
 * Files a start writes before any data: the lock (the first), then `format` and the first log
 * segment, each through a temporary file. A first start that died among them (a full disk) must not
 * leave a dir that is refused; but beside other files they prove nothing (anyone can name a file
 * `format`), and such a dir is not adopted.
 */
const isKeywardFile = (name: string) =>
  isKeywardData(name) || name === LOCK_FILE || name === 'format' || name === 'format.tmp' || /^wal-.*\.log\.tmp$/.test(name)

/** Looks without changing anything; throws DataDirError for a dir keyward must not use. */
export async function inspectDataDir(dir: string): Promise<DataDirContents> {
  let info
  try {
    // resolve() drops a trailing slash, through which lstat would follow a link.
    info = await lstat(resolve(dir))
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return 'missing'
    // Its parent may not be searched (the dir's own mode does not stop lstat).
    throw unreachable(error, dir)
  }
  if (info.isSymbolicLink()) throw new DataDirError(`data dir ${dir} is a symbolic link: give keyward the path of the directory itself`)
  if (!info.isDirectory()) throw new DataDirError(`data dir ${dir} is not a directory`)
  const uid = process.getuid!()
  if (info.uid !== uid) {
    throw new DataDirError(`data dir ${dir} is owned by uid ${info.uid}, not by uid ${uid} that runs keyward: run keyward as its owner, or chown it to uid ${uid}`)
  }
  const names = await readdir(dir)
  if (names.includes(SECRET_FILE)) await checkLegacySecret(dir, uid)
  if (names.some(isKeywardData)) return 'keyward'
  const others = names.filter((name) => !name.startsWith('.') && !isKeywardFile(name))
  if (others.length > 0) {
    const shown = others.slice(0, 3).join(', ') + (others.length > 3 ? ', ...' : '')
    throw new DataDirError(`data dir ${dir} is not keyward's: it holds other files (${shown}); give keyward an empty directory, or one that holds only dotfiles`)
  }
  return names.some(isKeywardFile) ? 'keyward' : 'unused'
}

/**
 * The `secret` a version with signed tokens left: no longer used (README "Upgrading from a version
 * with signed tokens"), but while it is there, the rule for it holds (README "The data dir"): a
 * regular file of the running user that nobody else may read.
 */
async function checkLegacySecret(dir: string, uid: number): Promise<void> {
  const path = join(dir, SECRET_FILE)
  let info
  try {
    info = await lstat(path)
  } catch (error) {
    if (isErrnoCode(error, 'ENOENT')) return // deleted since the dir was read: nothing to check
    throw error
  }
  const fix = 'it is no longer used (tokens are recorded, not signed): delete it'
  if (!info.isFile()) throw new DataDirError(`${path} is not a regular file: ${fix}`)
  if (info.uid !== uid) throw new DataDirError(`${path} is owned by uid ${info.uid}, not by uid ${uid} that runs keyward: ${fix}, or chown it to uid ${uid}`)
  // The contract's words: readable by nobody else (what it held could only leak by being read).
  if ((info.mode & 0o044) !== 0) {
    throw new DataDirError(`${path} may be read by others (mode 0${(info.mode & 0o777).toString(8)}): ${fix}, or chmod 600 it`)
  }
}

/** Whether the dir (checked by `inspectDataDir`) holds keyward's data: a snapshot, a log segment or a legacy `secret`. */
export async function holdsKeywardData(dir: string): Promise<boolean> {
  return (await readdir(dir).catch((error: unknown) => (isErrnoCode(error, 'ENOENT') ? [] : Promise.reject(error)))).some(isKeywardData)
}

/** A data dir to read (verify, backup): keyward's, checked as every command checks it (README "The data dir"). */
export async function requireKeywardDataDir(dir: string): Promise<void> {
  const contents = await inspectDataDir(dir)
  if (contents === 'missing') throw new DataDirError(`data dir ${dir} does not exist`)
  if (contents === 'unused') throw new DataDirError(`data dir ${dir} holds no keyward data: it is not initialised`)
}

/**
 * Refuses a dir keyward must not use; creates a missing one (0700), and makes one it initialises
 * (empty, only dotfiles, or what a first start writes before any data) private. A dir that holds
 * keyward's data already keeps the mode its owner gave it: nothing changes the mode of a dir keyward
 * did not create (README "The data dir"; the files in it are 0600 whatever the dir's mode).
 */
export async function prepareDataDir(dir: string): Promise<void> {
  if ((await inspectDataDir(dir)) === 'missing') {
    await mkdir(dir, { recursive: true, mode: 0o700 }).catch((error: unknown) => {
      const code = notWritableCode(error)
      if (code === undefined) throw error
      throw new DataDirError(`cannot create data dir ${dir} (${code}): create it for the user that runs keyward, or give a path that user may write`)
    })
    await inspectDataDir(dir) // whatever is there now (another start may have been first) must pass too
  }
  if (await holdsKeywardData(dir)) return requireWritable(dir)
  const { mode } = await lstat(resolve(dir))
  if ((mode & 0o777) !== 0o700) await chmod(dir, 0o700)
}

/**
 * A data dir of keyward's that its owner may not write in (made read-only with chmod, or on a
 * read-only file system): said so, rather than the EACCES of the first file made in it after recovery.
 */
async function requireWritable(dir: string): Promise<void> {
  try {
    await access(dir, constants.W_OK)
  } catch (error) {
    const code = notWritableCode(error)
    if (code === 'EROFS') throw new ReadOnlyDataDirError(dir)
    if (code === undefined) throw error
    throw new NotWritableDataDirError(dir)
  }
}
