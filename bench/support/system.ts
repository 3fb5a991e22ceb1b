/**
 * What the benchmarks read from the machine (Linux /proc; each reader answers null or NaN
 * elsewhere): a process's CPU time and memory, how busy the machine is, a one-line description;
 * and a memory cgroup for a server to run in (`memoryCgroup`).
 */
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises'
import { cpus } from 'node:os'

/** User + system CPU seconds of a process so far (utime + stime from /proc/PID/stat; null if unreadable). */
export async function cpuSeconds(pid: number): Promise<number | null> {
  try {
    // The command name (field 2) may hold spaces: the fields after it start after its ") ".
    const fields = (await Bun.file(`/proc/${pid}/stat`).text()).split(') ')[1]!.split(' ')
    return (Number(fields[11]) + Number(fields[12])) / 100 // clock ticks, 100 Hz on Linux
  } catch {
    return null
  }
}

/** A `kB` field of /proc/PID/status, in bytes (NaN if unreadable). */
export async function procStatus(pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(await Bun.file(`/proc/${pid}/status`).text())
    return match ? Number(match[1]) * 1024 : NaN
  } catch {
    return NaN
  }
}

/** Share of all cores busy over one second, e.g. "12%" (null where /proc/stat is missing). */
export async function busyBeforeStart(): Promise<string | null> {
  const sample = async () => {
    const fields = (await Bun.file('/proc/stat').text()).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
    return { idle: fields[3]! + fields[4]!, total: fields.reduce((a, b) => a + b, 0) }
  }
  try {
    const a = await sample()
    await Bun.sleep(1000)
    const b = await sample()
    return `${(100 - ((b.idle - a.idle) / (b.total - a.total)) * 100).toFixed(0)}%`
  } catch {
    return null
  }
}

/**
 * Waits until the given processes together use less than `maxShare` of a core over `windowMs`
 * (e.g. a server still answering requests a load generator gave up on, or collecting garbage),
 * at most `timeoutMs`. Answers whether they went quiet, and after how many seconds.
 */
export async function waitQuiet(
  pids: readonly number[],
  { windowMs = 200, maxShare = 0.1, timeoutMs = 30_000 }: { windowMs?: number; maxShare?: number; timeoutMs?: number } = {},
): Promise<{ quiet: boolean; seconds: number }> {
  const started = performance.now()
  const total = async () => {
    let sum = 0
    for (const pid of pids) sum += (await cpuSeconds(pid)) ?? 0
    return sum
  }
  for (;;) {
    const before = await total()
    await Bun.sleep(windowMs)
    const used = (await total()) - before
    const seconds = (performance.now() - started) / 1000
    // /proc counts in 10 ms ticks: a window shorter than a few ticks cannot tell.
    if (used <= Math.max(maxShare * (windowMs / 1000), 0.02)) return { quiet: true, seconds }
    if (seconds * 1000 >= timeoutMs) return { quiet: false, seconds }
  }
}

/** "2 × AMD EPYC · Bun 1.4.5" */
export function machineDescription(): string {
  const cpu = cpus()
  return `${cpu.length} × ${cpu[0]?.model.trim() ?? 'cpu'} · Bun ${Bun.version}`
}

export const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(0)

/** CPU seconds the whole machine has spent busy (all but idle and iowait; steal counts as busy), from /proc/stat. */
export async function machineBusySeconds(): Promise<number | null> {
  try {
    const fields = (await Bun.file('/proc/stat').text()).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
    const total = fields.slice(0, 8).reduce((a, b) => a + b, 0)
    return (total - fields[3]! - fields[4]!) / 100
  } catch {
    return null
  }
}

/** CPU seconds this process has used so far. */
export function ownCpuSeconds(): number {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) / 1e6
}

/**
 * CPU seconds used by a changing set of processes (`pids`, asked again every `rescanMs`) from
 * `ready` until `stop`, sampled every `intervalMs`: a process that starts meanwhile counts from
 * zero, one that ends loses at most its last interval.
 */
export function meterCpu(
  pids: () => Promise<number[]> | number[],
  { intervalMs = 100, rescanMs = 500 } = {},
): { readonly ready: Promise<void>; stop(): Promise<number> } {
  const first = new Map<number, number>()
  const last = new Map<number, number>()
  let known: number[] = []
  let scannedAt = -Infinity
  let stopped = false
  let initial = true
  const sample = async () => {
    if (performance.now() - scannedAt >= rescanMs) {
      // A source that cannot answer (a database restarting) keeps the last list.
      known = await Promise.resolve(pids()).catch(() => known)
      scannedAt = performance.now()
    }
    for (const pid of known) {
      const seconds = await cpuSeconds(pid)
      if (seconds === null) continue
      if (!first.has(pid)) first.set(pid, initial ? seconds : 0)
      last.set(pid, seconds)
    }
    initial = false
  }
  const ready = sample()
  const loop = (async () => {
    await ready
    while (!stopped) {
      await Bun.sleep(intervalMs)
      await sample()
    }
  })()
  return {
    ready,
    stop: async () => {
      stopped = true
      await loop
      let sum = 0
      for (const [pid, seconds] of last) sum += seconds - first.get(pid)!
      return sum
    },
  }
}

/** A memory cgroup that spawned processes join before they start (`memoryCgroup`). */
export interface MemoryCgroup {
  /** Put before a command: it joins the cgroup, then execs the command (same pid). */
  readonly prefix: readonly string[]
  /** Removes the cgroup; every process in it must have exited. */
  remove(): Promise<void>
}

/**
 * A cgroup limited to `bytes` of memory, as a container or a systemd unit's `MemoryMax=` would
 * run a process; null (with the reason) where none can be made (it needs root, and cgroup v1's
 * memory hierarchy or a v2 root that delegates memory). The command must join before it starts,
 * since the JavaScript engine reads the limit once, when it starts (docs/security.md).
 */
export async function memoryCgroup(bytes: number): Promise<MemoryCgroup | { readonly unavailable: string }> {
  const name = `keyward-bench-${process.pid}`
  const v1 = '/sys/fs/cgroup/memory'
  const v2 = '/sys/fs/cgroup'
  let dir: string
  try {
    if (await Bun.file(`${v1}/memory.limit_in_bytes`).exists()) {
      dir = `${v1}/${name}`
      await mkdir(dir)
      await writeFile(`${dir}/memory.limit_in_bytes`, String(bytes))
    } else {
      if (!(await readFile(`${v2}/cgroup.controllers`, 'utf8')).split(/\s+/).includes('memory')) return { unavailable: 'no memory controller in this cgroup v2 hierarchy' }
      await writeFile(`${v2}/cgroup.subtree_control`, '+memory')
      dir = `${v2}/${name}`
      await mkdir(dir)
      await writeFile(`${dir}/memory.max`, String(bytes))
    }
  } catch (error) {
    return { unavailable: `a memory cgroup could not be made (${(error as Error).message}); it needs root` }
  }
  return {
    prefix: ['sh', '-c', 'echo $$ > "$0" && exec "$@"', `${dir}/cgroup.procs`],
    remove: () => rmdir(dir).catch(() => {}),
  }
}
