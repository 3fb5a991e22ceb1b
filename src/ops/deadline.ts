/** Waiting for something for a while only: a stop that must end, a log reader that may not read. */

/**
 * Whether `work` is done within `ms` (Infinity: waits for it); it is not cancelled either way, and
 * its failure is thrown as it would be by awaiting it.
 */
export async function settledWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms === Infinity) return work.then(() => true)
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)))
  try {
    return await Promise.race([work.then(() => true), late])
  } finally {
    clearTimeout(timer)
  }
}
