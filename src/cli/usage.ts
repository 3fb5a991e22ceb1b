/** Usage texts and the error that means "bad command line" (exit 2). */
export class UsageError extends Error {}

export const USAGE = {
  main: `keyward: administration service for cryptographic device enrollment

Usage:
  keyward serve [--data DIR] [--host H] [--port P] [--public-url URL] [--auto-verify-installations]
  keyward init [--data DIR] [--vendor-description TEXT]
  keyward issue-token --org ID --role ROLE [--ttl DURATION] [--description TEXT] [--data DIR]
  keyward tokens list [--org ID] [--data DIR]
  keyward tokens revoke TOKEN_ID [--data DIR]
  keyward --help | --version

Run 'keyward <command> --help' for a command's options.`,
  serve: `Usage: keyward serve [options]

Serves the API. On an empty data dir it first initialises it (like 'init') and prints the
vendor organization id and an admin token once, as one JSON line on stdout.

Options:
  --data DIR                     data directory (env KEYWARD_DATA, default ./data)
  --host H                       address to bind (env KEYWARD_HOST, default 127.0.0.1)
  --port P                       port (env KEYWARD_PORT, default 3000)
  --public-url URL               host_url handed to new applications
                                 (env KEYWARD_PUBLIC_URL, default http://<host>:<port>)
  --auto-verify-installations    new installations start verified
                                 (env KEYWARD_AUTO_VERIFY_INSTALLATIONS=1)
  --audit-retention DURATION     audit events older than this are dropped, like 400d
                                 (env KEYWARD_AUDIT_RETENTION, default 400d)
  --help                         this text`,
  init: `Usage: keyward init [options]

Creates the data dir and the vendor organization, and prints
{"organization_id": "...", "token": "..."} (a vendor admin token, shown once) as one JSON line.
Fails (exit 1) if the data dir is already initialised.

Options:
  --data DIR                    data directory (env KEYWARD_DATA, default ./data)
  --vendor-description TEXT     the vendor organization's description (default "Vendor")
  --help                        this text`,
  'issue-token': `Usage: keyward issue-token --org ID --role ROLE [options]

Records a bearer token for organization ID with role ROLE (admin, application_admin or
viewer; 'administrator' means admin) and prints it: it is shown this once. Works while a
server runs on the same data dir (the server records it, and accepts it at once).

Options:
  --org ID              organization the token is issued to (required)
  --role ROLE           admin | application_admin | viewer (required)
  --ttl DURATION        lifetime like 45s, 30m, 12h, 90d (default 90d, at most 366d)
  --description TEXT    what the token is for (shown in token lists)
  --data DIR            data directory (env KEYWARD_DATA, default ./data)
  --help                this text`,
  tokens: `Usage: keyward tokens list [--org ID] [--data DIR]
       keyward tokens revoke TOKEN_ID [--data DIR]

list      prints every token's record (or organization ID's) as one JSON line each; no secrets
revoke    revokes token TOKEN_ID: from its next request on it is refused (401); an unknown
          TOKEN_ID exits 2

Both work while a server runs on the same data dir: the server makes the change, and a
revocation has taken effect before the command exits.

Options:
  --org ID      list only this organization's tokens
  --data DIR    data directory (env KEYWARD_DATA, default ./data)
  --help        this text`,
} as const
