/**
 * Text as it may be shown in a message or a log line: a command quotes what it was given, and an
 * argument put in the wrong place may be a token, an application's api_key or a database URL with
 * its password, which stderr would then carry into a journal (docs/security.md, "Secrets in messages").
 * A URL's password ends at its `@`, never past a double quote or a blank (a JSON line's next field).
 */
export function withoutSecrets(text: string): string {
  return text
    .replace(/kw(?:2|k)_[A-Za-z0-9_-]+/g, (secret) => `${secret.slice(0, 4)}… (a secret: not shown)`)
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/?[^\s/@:"']*:)[^\s@"]*@/gi, '$1***@')
}
