/**
 * A benchmark's options, read one way for every benchmark of the driver (bench/run.ts): `--name
 * value` (`--name` alone for a switch). `--help` prints what the benchmark takes (exit 0); an
 * unknown option or a missing value says so and prints it too (exit 2), never a stack trace.
 */
import { parseArgs } from 'node:util'

type OptionSpec = { readonly type: 'string'; readonly default?: string } | { readonly type: 'boolean' }

export function benchmarkOptions<O extends Record<string, OptionSpec>>(benchmark: string, options: O, args = process.argv.slice(2)) {
  const usage = () =>
    `usage: npm run bench -- ${benchmark} ${Object.entries(options)
      .map(([name, spec]) => (spec.type === 'boolean' ? `[--${name}]` : `[--${name} ${'default' in spec && spec.default !== undefined ? spec.default : 'VALUE'}]`))
      .join(' ')}`
  if (args.includes('--help') || args.includes('-h')) {
    console.log(usage())
    process.exit(0)
  }
  try {
    return parseArgs({ args, options, strict: true }).values as unknown as {
      [K in keyof O]: O[K] extends { readonly default: string } ? string : O[K] extends { readonly type: 'boolean' } ? boolean | undefined : string | undefined
    }
  } catch (error) {
    console.error(`bench ${benchmark}: ${(error as Error).message}\n${usage()}`)
    process.exit(2)
  }
}
