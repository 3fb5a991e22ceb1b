/**
 * Watching the event loop's turns while long work goes on (src/ops/turns.ts, `mapInTurns`,
 * `nextTurn`): another request's work stands in for them, taking one entry per turn.
 */

/**
 * What happens in each turn of the event loop while `work` runs: another request's work takes one
 * entry ('turn') per turn, and `work` logs its own entries into the same order (`log`). Returns
 * that order from the first 'turn' on: what `work` did at once, before any turn, is before it.
 */
export async function turnsDuring(work: (log: (name: string) => void) => Promise<unknown>): Promise<string[]> {
  const order: string[] = []
  let stopped = false
  const loopTurns = () => {
    if (stopped) return
    order.push('turn')
    setImmediate(loopTurns)
  }
  setImmediate(loopTurns)
  try {
    await work((name) => order.push(name))
  } finally {
    stopped = true
  }
  return order.slice(order.indexOf('turn'))
}
