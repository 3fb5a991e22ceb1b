#!/usr/bin/env bun
/** CLI entry: parse argv, dispatch to a command. Exit codes: 0 ok, 1 failure, 2 bad usage or unknown org/role. */
import { printOutput, stdoutFailure } from './cli/stdout'
import { parseArgs } from 'node:util'
import { serveCommand } from './cli/serve'
import { initCommand } from './cli/init'
import { issueTokenCommand } from './cli/issue-token'
import { tokensCommand } from './cli/tokens'
import { backupCommand } from './cli/backup'
import { restoreCommand } from './cli/restore'
import { verifyCommand } from './cli/verify'
import { DATABASE_URL_OPTION, databaseUrlOf } from './cli/database'
import { USAGE, UsageError, wholeNumber } from './cli/usage'
import { withoutSecrets } from './ops/redact'
import { VERSION } from './version'
import { canonicalDataDir } from './store/data-dir'
import { DATA_FORMAT } from './store/format'
import { SCHEMA_VERSION } from './storage/postgres/schema'

const env = process.env
const DATA = { type: 'string', default: env.KEYWARD_DATA || './data' } as const
/** `--help` of every command; `-h` too, as for the program itself (`keyward -h`). */
const HELP = { type: 'boolean', short: 'h', default: false } as const
/** A yes/no environment variable: unset or empty is no; a value that is neither is bad usage, not silently no. */
function switchedOn(name: string): boolean {
  const value = (env[name] ?? '').trim().toLowerCase()
  if (['1', 'true', 'yes', 'on'].includes(value)) return true
  if (['', '0', 'false', 'no', 'off'].includes(value)) return false
  throw new UsageError(`invalid ${name} '${env[name]}': use 1 or 0 (or true, yes, on; false, no, off)`)
}

/** KEYWARD_COMPACT_AFTER_BYTES: a whole number of bytes (else bad usage, like every other variable). */
const compactAfterBytes = (text: string) => wholeNumber('KEYWARD_COMPACT_AFTER_BYTES', text, 1, Number.MAX_SAFE_INTEGER, 'give a whole number of bytes')

/** A string option whose default is the environment variable `name` when that is set. */
const fromEnv = (name: string) => ({ type: 'string', ...(env[name] ? { default: env[name] } : {}) }) as const

const commands = {
  serve: {
    options: {
      data: DATA,
      'database-url': DATABASE_URL_OPTION,
      host: { type: 'string', default: env.KEYWARD_HOST || '127.0.0.1' },
      port: { type: 'string', default: env.KEYWARD_PORT || '3000' },
      'public-url': fromEnv('KEYWARD_PUBLIC_URL'),
      'tls-cert': fromEnv('KEYWARD_TLS_CERT'),
      'tls-key': fromEnv('KEYWARD_TLS_KEY'),
      'auto-verify-installations': { type: 'boolean', default: false },
      'cors-origin': { type: 'string', multiple: true, default: (env.KEYWARD_CORS_ORIGIN ?? '').split(',').filter((o) => o.trim()) },
      'audit-retention': { type: 'string', default: env.KEYWARD_AUDIT_RETENTION || '400d' },
      'rate-limit': { type: 'string', default: env.KEYWARD_RATE_LIMIT || '100' },
      'log-format': { type: 'string', default: env.KEYWARD_LOG_FORMAT || 'json' },
      'database-timeout': { type: 'string', default: env.KEYWARD_DATABASE_TIMEOUT || '10s' },
      'database-connections': { type: 'string', default: env.KEYWARD_DATABASE_CONNECTIONS || '16' },
      'stop-timeout': { type: 'string', default: env.KEYWARD_STOP_TIMEOUT || '20s' },
      help: HELP,
    },
    run: (v: Record<string, unknown>) =>
      serveCommand({
        data: v.data as string,
        databaseUrl: databaseUrlOf(v['database-url']),
        host: v.host as string,
        port: v.port as string,
        ...(v['public-url'] !== undefined ? { publicUrl: v['public-url'] as string } : {}),
        ...(v['tls-cert'] !== undefined ? { tlsCert: v['tls-cert'] as string } : {}),
        ...(v['tls-key'] !== undefined ? { tlsKey: v['tls-key'] as string } : {}),
        autoVerifyInstallations: (v['auto-verify-installations'] as boolean) || switchedOn('KEYWARD_AUTO_VERIFY_INSTALLATIONS'),
        corsOrigins: v['cors-origin'] as string[],
        auditRetention: v['audit-retention'] as string,
        rateLimit: v['rate-limit'] as string,
        logFormat: v['log-format'] as string,
        databaseTimeout: v['database-timeout'] as string,
        databaseConnections: v['database-connections'] as string,
        stopTimeout: v['stop-timeout'] as string,
        // Environment only, a tuning knob (the crash loop uses it to compact under load).
        ...(env.KEYWARD_COMPACT_AFTER_BYTES ? { compactAfterBytes: compactAfterBytes(env.KEYWARD_COMPACT_AFTER_BYTES) } : {}),
      }),
  },
  init: {
    options: { data: DATA, 'database-url': DATABASE_URL_OPTION, 'vendor-description': { type: 'string', default: 'Vendor' }, help: HELP },
    run: (v: Record<string, unknown>) =>
      initCommand({ data: v.data as string, databaseUrl: databaseUrlOf(v['database-url']), vendorDescription: v['vendor-description'] as string }),
  },
  'issue-token': {
    options: {
      data: DATA,
      'database-url': DATABASE_URL_OPTION,
      org: { type: 'string' },
      role: { type: 'string' },
      ttl: { type: 'string', default: '90d' },
      description: { type: 'string' },
      help: HELP,
    },
    run: (v: Record<string, unknown>) =>
      issueTokenCommand({
        data: v.data as string,
        databaseUrl: databaseUrlOf(v['database-url']),
        org: v.org as string | undefined,
        role: v.role as string | undefined,
        ttl: v.ttl as string,
        ...(v.description !== undefined ? { description: v.description as string } : {}),
      }),
  },
  tokens: {
    options: { data: DATA, 'database-url': DATABASE_URL_OPTION, org: { type: 'string' }, help: HELP },
    positionals: true,
    run: (v: Record<string, unknown>, positionals: string[]) =>
      tokensCommand({
        data: v.data as string,
        databaseUrl: databaseUrlOf(v['database-url']),
        ...(v.org !== undefined ? { org: v.org as string } : {}),
        positionals,
      }),
  },
  backup: {
    options: { data: DATA, 'database-url': DATABASE_URL_OPTION, out: { type: 'string' }, help: HELP },
    run: (v: Record<string, unknown>) =>
      backupCommand({ data: v.data as string, databaseUrl: databaseUrlOf(v['database-url']), out: v.out as string | undefined }),
  },
  // No default data dir: restore names where it writes.
  restore: {
    options: { from: { type: 'string' }, data: { type: 'string' }, 'database-url': DATABASE_URL_OPTION, help: HELP },
    run: (v: Record<string, unknown>) =>
      restoreCommand({ from: v.from as string | undefined, data: v.data as string | undefined, databaseUrl: databaseUrlOf(v['database-url']) }),
  },
  verify: {
    options: { data: DATA, 'database-url': DATABASE_URL_OPTION, help: HELP },
    run: (v: Record<string, unknown>) => verifyCommand({ data: v.data as string, databaseUrl: databaseUrlOf(v['database-url']) }),
  },
} as const

/** One of the commands above (its own key: `toString` or `__proto__` is none). */
const isCommand = (name: string): name is keyof typeof commands => Object.hasOwn(commands, name)

async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv
  // Nothing may follow them but, for help, one command (`keyward help serve`): an unknown flag is bad
  // usage wherever it stands (README "Configuration": exit code 2), as it is after a command's --help.
  if (first === '--help' || first === '-h' || first === 'help') {
    if (rest.length === 0) return print(USAGE.main)
    if (rest.length === 1 && isCommand(rest[0]!)) return print(USAGE[rest[0]])
    return usageError(`unexpected argument '${rest.find((arg) => !isCommand(arg)) ?? rest[1]}'`, USAGE.main)
  }
  if (first === '--version' || first === '-v') {
    if (rest.length > 0) return usageError(`unexpected argument '${rest[0]}'`, USAGE.main)
    return print(`keyward ${VERSION} (data format ${DATA_FORMAT}, database schema ${SCHEMA_VERSION})`)
  }
  if (!first || !isCommand(first)) return usageError(first ? `unknown command '${first}'` : 'no command given', USAGE.main)
  const name = first
  const command = commands[name]
  let values: Record<string, unknown>
  let positionals: string[]
  let given: Set<string>
  try {
    const parsed = parseArgs({ args: rest, options: command.options, strict: true, allowPositionals: 'positionals' in command, tokens: true })
    ;({ values, positionals } = parsed)
    given = new Set(parsed.tokens.flatMap((token) => (token.kind === 'option' ? [token.name] : [])))
  } catch (error) {
    return usageError((error as Error).message, USAGE[name])
  }
  if (values.help) return print(USAGE[name])
  // One store: a data dir named on the command line wins over KEYWARD_DATABASE_URL (as every flag
  // wins over its variable), and naming both on the command line is a mistake, not a choice (backup
  // and restore, which work on data dirs only, say so themselves).
  if (given.has('data') && given.has('database-url')) {
    if (name !== 'backup' && name !== 'restore') return usageError('give --data or --database-url, not both', USAGE[name])
  } else if (given.has('data')) delete values['database-url']
  if (values.data === '') return usageError('--data is empty: give a directory, like ./data', USAGE[name])
  try {
    // Every command works on the dir the kernel resolves the path to (src/store/data-dir.ts).
    if (typeof values.data === 'string' && values['database-url'] === undefined) values.data = canonicalDataDir(values.data)
    return await command.run(values, positionals)
  } catch (error) {
    if (error instanceof UsageError) return usageError(namedAsSet(error.message, given, command.options), USAGE[name])
    // Damage, a data dir in use, already initialised, a busy port...: the message says what and where.
    console.error(`keyward: ${withoutSecrets(failureMessage(error))}`)
    return 1
  }
}

/**
 * A bad value taken from the environment is named as the variable the operator set, not as a flag
 * nobody passed (`invalid --rate-limit 'x'` becomes `invalid KEYWARD_RATE_LIMIT 'x'`). A flag's
 * variable is KEYWARD_ and its name; the value came from it when the flag was not given and the
 * command took the variable as the flag's default (`--data` of `restore` takes none, nor `--org`).
 */
function namedAsSet(message: string, given: ReadonlySet<string>, options: Readonly<Record<string, { readonly type: string; readonly default?: unknown }>>): string {
  const flag = /^(?:invalid )?--([a-z-]+)/.exec(message)?.[1]
  if (flag === undefined || given.has(flag)) return message
  const variable = `KEYWARD_${flag.toUpperCase().replaceAll('-', '_')}`
  const fallback = options[flag]?.default
  const fromVariable = env[variable] !== undefined && env[variable] !== '' && (fallback === env[variable] || (Array.isArray(fallback) && fallback.length > 0))
  return fromVariable ? message.replace(`--${flag}`, variable) : message
}

/** Help and version: a stdout that cannot take them (a full disk) is exit 1 with one line, not a stack trace. */
function print(text: string): number {
  try {
    printOutput(text + '\n')
    return 0
  } catch (error) {
    console.error(`keyward: ${stdoutFailure(error)}`)
    return 1
  }
}

function usageError(message: string, usage: string): number {
  console.error(`keyward: ${withoutSecrets(message)}\n\n${usage}`)
  return 2
}

process.exitCode = await main(process.argv.slice(2))

/**
 * A failure as the CLI says it. A file this user may not open (EACCES) is said with what to fix, not
 * as the system call's error: a data dir whose files another user owns (`init` run as root, then only
 * the dir given to the service's user) said `EACCES: permission denied, open '.../format'` (review, 2026-11-30).
 */
function failureMessage(error: unknown): string {
  const { code, path, syscall } = (error ?? {}) as NodeJS.ErrnoException
  // Opening or listing names the file at fault; a rename's `path` is its source (a file of keyward's own).
  if ((code === 'EACCES' || code === 'EPERM') && typeof path === 'string' && (syscall === 'open' || syscall === 'scandir' || syscall === 'opendir')) {
    return `${path} may not be opened by this user (${code}): run keyward as the user that owns it; a data dir and every file in it must be that user's (chown -R)`
  }
  return String((error as Error)?.message ?? error)
}
