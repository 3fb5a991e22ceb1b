/** Usage texts and the error that means "bad command line" (exit 2). */
export class UsageError extends Error {}

export const USAGE = {
  main: `keyward: administration service for cryptographic device enrollment

Usage:
  keyward serve [--data DIR | --database-url URL] [--host H] [--port P] [--public-url URL] [--auto-verify-installations]
  keyward init [--data DIR | --database-url URL] [--vendor-description TEXT]
  keyward issue-token --org ID --role ROLE [--ttl DURATION] [--data DIR | --database-url URL]
  keyward --help | --version

Run 'keyward <command> --help' for a command's options.`,
  serve: `Usage: keyward serve [options]

Serves the API. On an empty data dir (or database) it first initialises it (like 'init') and
prints the vendor organization id and an admin token once, as one JSON line on stdout.

Options:
  --data DIR                     data directory (env KEYWARD_DATA, default ./data)
  --database-url URL             store everything in this PostgreSQL database instead
                                 (postgres://...; env KEYWARD_DATABASE_URL); any number of
                                 servers may share it
  --host H                       address to bind (env KEYWARD_HOST, default 127.0.0.1)
  --port P                       port (env KEYWARD_PORT, default 3000)
  --public-url URL               host_url handed to new applications
                                 (env KEYWARD_PUBLIC_URL, default http://<host>:<port>)
  --auto-verify-installations    new installations start verified
                                 (env KEYWARD_AUTO_VERIFY_INSTALLATIONS=1)
  --help                         this text`,
  init: `Usage: keyward init [options]

Creates the data dir, the vendor organization and the token-signing secret, and prints
{"organization_id": "...", "token": "..."} (a vendor admin token) as one JSON line.
Fails (exit 1) if the data dir (or database) is already initialised.

Options:
  --data DIR                    data directory (env KEYWARD_DATA, default ./data)
  --database-url URL            a PostgreSQL database instead (env KEYWARD_DATABASE_URL)
  --vendor-description TEXT     the vendor organization's description (default "Vendor")
  --help                        this text`,
  'issue-token': `Usage: keyward issue-token --org ID --role ROLE [options]

Prints a bearer token for organization ID with role ROLE (admin, application_admin or
viewer; 'administrator' means admin). Works while a server runs on the same data dir
(or database).

Options:
  --org ID          organization the token is issued to (required)
  --role ROLE       admin | application_admin | viewer (required)
  --ttl DURATION    lifetime like 45s, 30m, 12h, 90d (default 90d)
  --data DIR        data directory (env KEYWARD_DATA, default ./data)
  --database-url URL
                    a PostgreSQL database instead (env KEYWARD_DATABASE_URL)
  --help            this text`,
} as const
