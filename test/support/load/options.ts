/** What a load run is asked to do (the run itself: index.ts). */
import type { ServeOptions } from '../server-process'

export interface LoadOptions {
  readonly dataDir: string
  /** How long the load runs at most. */
  readonly seconds: number
  /** Ends the load once this many requests were made (a test's fixed amount of work); default: none. */
  readonly requests?: number
  /** Concurrent clients, spread evenly over the tenants. */
  readonly clients: number
  /** Customers (default 4); the first half are enabled for virtual environments. */
  readonly tenants?: number
  /** The server compacts when its log segment passes this many bytes (default 4 MiB). */
  readonly compactAfterBytes?: number
  readonly seed?: number
  readonly log?: (line: string) => void
  /** Wraps the server's command line (e.g. to profile it, or to check the leak detector with a leaking preload). */
  readonly wrap?: ServeOptions['wrap']
}
