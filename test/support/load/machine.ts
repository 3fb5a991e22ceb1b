/** The machine during the load, second by second: CPU of the server, the clients and everything else; I/O stall (Linux /proc). */

/** What the machine did in one second of the run: CPU in cores, the I/O stall in ms (Linux /proc). */
export interface MachineSecond {
  /** Seconds since the load started, at the end of this second. */
  readonly t: number
  readonly serverCores: number
  /** This process: the clients. */
  readonly benchCores: number
  /** Every other process on the machine (a shared machine's neighbours). */
  readonly otherCores: number
  readonly iowaitCores: number
  /** Time all non-idle tasks were stalled on I/O (PSI io "full"), in ms; null where the kernel has no PSI. */
  readonly ioStallMs: number | null
}

interface CpuCounters {
  readonly at: number
  readonly busyTicks: number
  readonly iowaitTicks: number
  readonly serverTicks: number
  readonly benchMicros: number
  readonly ioStallMicros: number | null
}

/** Cumulative counters, to be differenced (clock ticks are 1/100 s on Linux). */
export async function cpuCounters(pid: number): Promise<CpuCounters | null> {
  try {
    const cpu = (await Bun.file('/proc/stat').text()).split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    const busyTicks = cpu[0]! + cpu[1]! + cpu[2]! + cpu[5]! + cpu[6]! + (cpu[7] ?? 0)
    const fields = (await Bun.file(`/proc/${pid}/stat`).text()).split(') ')[1]!.split(' ')
    const usage = process.cpuUsage()
    let ioStallMicros: number | null = null
    try {
      const full = /^full .*total=(\d+)/m.exec(await Bun.file('/proc/pressure/io').text())
      if (full) ioStallMicros = Number(full[1])
    } catch {}
    return {
      at: performance.now(),
      busyTicks,
      iowaitTicks: cpu[4]!,
      serverTicks: Number(fields[11]) + Number(fields[12]),
      benchMicros: usage.user + usage.system,
      ioStallMicros,
    }
  } catch {
    return null
  }
}

export function machineSecond(a: CpuCounters, b: CpuCounters, t: number): MachineSecond {
  const seconds = (b.at - a.at) / 1000
  const serverCores = (b.serverTicks - a.serverTicks) / 100 / seconds
  const benchCores = (b.benchMicros - a.benchMicros) / 1e6 / seconds
  const busyCores = (b.busyTicks - a.busyTicks) / 100 / seconds
  return {
    t,
    serverCores,
    benchCores,
    otherCores: Math.max(0, busyCores - serverCores - benchCores),
    iowaitCores: (b.iowaitTicks - a.iowaitTicks) / 100 / seconds,
    ioStallMs: a.ioStallMicros !== null && b.ioStallMicros !== null ? (b.ioStallMicros - a.ioStallMicros) / 1000 / seconds : null,
  }
}
