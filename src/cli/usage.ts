/** Usage texts and the error that means "bad command line" (exit 2). */
import * as v from 'valibot'
import { Description } from '../modules/shared/model'

export class UsageError extends Error {}

/** A description given as `flag` (`--description`, `--vendor-description`): the API's rule for one, else bad usage. */
export function descriptionFlag(flag: string, text: string): string {
  if (!v.is(Description, text)) throw new UsageError(`${flag} must be 1 to 1024 characters, not only blanks or invisible ones`)
  return text
}

/** A whole number from `min` to `max` as typed for `name` (a flag, or a variable); else bad usage saying what to give. */
export function wholeNumber(name: string, text: string, min: number, max: number, hint: string): number {
  const value = Number(text)
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) throw new UsageError(`invalid ${name} '${text}': ${hint}`)
  return value
}

export const USAGE = {
  main: `keyward: administration service for cryptographic device enrollment

Usage:
  keyward serve [--data DIR | --database-url URL] [--host H] [--port P] [--public-url URL]
                [--tls-cert FILE --tls-key FILE] [--auto-verify-installations]
                [--cors-origin ORIGIN]... [--audit-retention DURATION] [--rate-limit N]
                [--log-format json|text] [--database-timeout DURATION] [--database-connections N]
                [--stop-timeout DURATION]
  keyward init [--data DIR | --database-url URL] [--vendor-description TEXT]
  keyward issue-token --org ID --role ROLE [--ttl DURATION] [--description TEXT]
                      [--data DIR | --database-url URL]
  keyward tokens list [--org ID] [--data DIR | --database-url URL]
  keyward tokens revoke TOKEN_ID [--data DIR | --database-url URL]
  keyward backup --out FILE [--data DIR]
  keyward restore --from FILE --data DIR
  keyward verify [--data DIR | --database-url URL]
  keyward --help | --version

Run 'keyward <command> --help' (or 'keyward help <command>') for a command's options.`,
  serve: `Usage: keyward serve [options]

Serves the API. On an empty data dir (or database) it first initialises it (like 'init') and
prints the vendor organization id and an admin token once, as one JSON line on stdout. The
port is bound first: a start that fails leaves nothing behind. One process at a time uses a
data dir (a lock held by the operating system); another one is refused (exit 1).

Options:
  --data DIR                     data directory (env KEYWARD_DATA, default ./data): missing,
                                 empty or holding only dotfiles, or keyward's; owned by the
                                 user running keyward, not a symbolic link
  --database-url URL             store everything in this PostgreSQL database instead
                                 (postgres://...; env KEYWARD_DATABASE_URL); any number of
                                 servers may share it
  --host H                       address to bind (env KEYWARD_HOST, default 127.0.0.1)
  --port P                       port (env KEYWARD_PORT, default 3000; 0 picks a free one)
  --public-url URL               host_url handed to new applications, an absolute http or
                                 https URL (env KEYWARD_PUBLIC_URL, default
                                 http(s)://<host>:<port>)
  --tls-cert FILE                serve HTTPS only, with this PEM certificate (chain)
                                 (env KEYWARD_TLS_CERT); needs --tls-key
  --tls-key FILE                 the certificate's PEM private key (env KEYWARD_TLS_KEY)
  --auto-verify-installations    new installations start verified
                                 (env KEYWARD_AUTO_VERIFY_INSTALLATIONS: 1, true, yes or on;
                                 0, false, no or off)
  --cors-origin ORIGIN           let pages on ORIGIN (e.g. https://console.example.com) call the
                                 API from a browser; repeatable (env KEYWARD_CORS_ORIGIN,
                                 comma-separated; default: none)
  --audit-retention DURATION     audit events older than this are dropped, like 400d
                                 (env KEYWARD_AUDIT_RETENTION, default 400d)
  --rate-limit N                 requests per second per token, and per client address for
                                 requests without a valid token, with bursts of 2N; over it:
                                 429 (env KEYWARD_RATE_LIMIT, default 100; 0 turns it off)
  --log-format FORMAT            json (one object per line) or text, on stderr
                                 (env KEYWARD_LOG_FORMAT, default json)
  --database-timeout DURATION    database mode: a request that has waited this long for the
                                 database's answers is 503 database_unavailable, like 10s;
                                 at most 24h (env KEYWARD_DATABASE_TIMEOUT, default 10s)
  --database-connections N       database mode: this instance's connection pool, 1 to 1000; it
                                 holds up to N + 2 connections, 5 at least
                                 (env KEYWARD_DATABASE_CONNECTIONS, default 16)
  --stop-timeout DURATION        a stop waits this long for the answers in flight, then closes
                                 their connections; keep it below your service manager's stop
                                 timeout; at most 24h (env KEYWARD_STOP_TIMEOUT, default 20s)
  -h, --help                     this text

Environment only: KEYWARD_COMPACT_AFTER_BYTES, a snapshot once the log passes this many bytes
and the size of the last snapshot (default 67108864, 64 MiB).`,
  init: `Usage: keyward init [options]

Creates the data dir (or the database's schema) and the vendor organization, and prints
{"organization_id": "...", "token": "..."} (a vendor admin token, shown once) as one JSON line.
Fails (exit 1) if the data dir (or database) is already initialised, or the data dir is in
use or not one keyward accepts.

Options:
  --data DIR                    data directory (env KEYWARD_DATA, default ./data): missing,
                                empty or holding only dotfiles; owned by the user running
                                keyward, not a symbolic link
  --database-url URL            a PostgreSQL database instead (env KEYWARD_DATABASE_URL)
  --vendor-description TEXT     the vendor organization's description (default "Vendor")
  -h, --help                    this text`,
  'issue-token': `Usage: keyward issue-token --org ID --role ROLE [options]

Records a bearer token for organization ID with role ROLE (admin, application_admin or
viewer; 'administrator' means admin) and prints it: it is shown this once. Works while a
server runs on the same data dir (the server records it, and accepts it at once) or database.

Options:
  --org ID              organization the token is issued to (required)
  --role ROLE           admin | application_admin | viewer (required)
  --ttl DURATION        lifetime like 45s, 30m, 12h, 90d (default 90d, at most 366d)
  --description TEXT    what the token is for (shown in token lists)
  --data DIR            data directory (env KEYWARD_DATA, default ./data)
  --database-url URL    a PostgreSQL database instead (env KEYWARD_DATABASE_URL)
  -h, --help            this text`,
  tokens: `Usage: keyward tokens list [--org ID] [--data DIR | --database-url URL]
       keyward tokens revoke TOKEN_ID [--data DIR | --database-url URL]

list      prints every token's record (or organization ID's) as one JSON line each; no secrets
revoke    revokes token TOKEN_ID (its UUID, or the 32 hex digits after kw2_ in the token):
          from its next request on it is refused (401); an unknown TOKEN_ID exits 2

Both work while a server runs on the same data dir (the server makes the change) or database,
and a revocation has taken effect on every server before the command exits.

Options:
  --org ID              list only this organization's tokens
  --data DIR            data directory (env KEYWARD_DATA, default ./data)
  --database-url URL    a PostgreSQL database instead (env KEYWARD_DATABASE_URL)
  -h, --help            this text`,
  backup: `Usage: keyward backup --out FILE [options]

Writes a consistent copy of the data dir to FILE (mode 0600; a tar file with SHA-256 checksums),
also while a server runs on it. Holds every write acknowledged before it began. Replaces FILE.
In database mode, back up with the database's own tools (pg_dump).

Options:
  --out FILE     the backup file to write (required)
  --data DIR     data directory (env KEYWARD_DATA, default ./data)
  -h, --help     this text`,
  restore: `Usage: keyward restore --from FILE --data DIR

Restores a backup into DIR, which must be missing or empty. Checks the whole backup before
writing anything. In database mode, restore with the database's own tools (pg_restore).

Options:
  --from FILE    the backup file (required)
  --data DIR     the data directory to create (required)
  -h, --help     this text`,
  verify: `Usage: keyward verify [options]

Checks every file of the data dir without changing anything, also while a server runs on it.
Intact: exit 0 and a summary (data format, log position, records per table). Damaged: exit 1
and the file and byte offset of the first damage. With --database-url: checks that the
database's schema is the version this keyward writes (exit 1 naming both otherwise).

Options:
  --data DIR            data directory (env KEYWARD_DATA, default ./data)
  --database-url URL    check a PostgreSQL database instead (env KEYWARD_DATABASE_URL)
  -h, --help            this text`,
} as const
