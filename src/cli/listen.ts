/**
 * Where and how `serve` listens (README "Configuration"): the port, bound
 * before the data dir is touched; the TLS certificate and key; the public URL handed out as host_url.
 * Each is checked before anything else happens, so a start that fails leaves nothing behind.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { TCPSocketListener } from 'bun'
import type { App } from '../app'
import { isErrnoCode } from '../store/fs-util'
import { UsageError, wholeNumber } from './usage'

/** `--port`: digits only, like every number of the command line (`0x10`, `4.775e4` are bad usage, not ports 16 and 47750). */
export const parsePort = (text: string): number => wholeNumber('--port', text, 0, 65535, 'give a number from 0 to 65535')

/** host_url is handed to every new application, so it must be a URL a client can call. */
export function checkPublicUrl(text: string): void {
  let url: URL | undefined
  try {
    url = new URL(text)
  } catch {}
  // The URL parser also takes `http:host` and `https:/host`, and trims blanks; the text itself is
  // what every application's host_url gets, so it must be written out in full.
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '' || !/^https?:\/\/[^\s/?#]+\S*$/i.test(text)) {
    throw new UsageError(`invalid --public-url '${text}': give an absolute http or https URL, like https://keyward.example.com`)
  }
}

/** 0.0.0.0 or :: (in any spelling): host_url would then name an address no client can call. */
function isWildcardHost(host: string): boolean {
  try {
    const { hostname } = new URL(`http://${host.includes(':') ? `[${host}]` : host}`)
    return hostname === '0.0.0.0' || hostname === '[::]'
  } catch {
    return false
  }
}

/** What to warn about when host_url would default to a wildcard `address`; null when nothing. */
export function wildcardWarning(host: string, publicUrl: string | undefined, address: string): string | null {
  if (publicUrl !== undefined || !isWildcardHost(host)) return null
  return `${host} is a wildcard address; new applications get host_url ${address}, which no client can call: set --public-url`
}

export interface TlsFiles {
  readonly cert: string
  readonly key: string
}

/** Whether TLS is asked for: both files, or neither (one alone is bad usage, found before the server says it is starting). */
export function givesTls(certFile: string | undefined, keyFile: string | undefined): boolean {
  // Each message leads with the flag given, which main.ts names as its variable if it came from there.
  if (keyFile === undefined && certFile !== undefined) throw new UsageError('--tls-cert without --tls-key: give both, or neither')
  if (certFile === undefined && keyFile !== undefined) throw new UsageError('--tls-key without --tls-cert: give both, or neither')
  for (const [flag, file] of [['--tls-cert', certFile], ['--tls-key', keyFile]] as const) {
    if (file === '') throw new UsageError(`${flag} is empty: give the path of a PEM file`)
  }
  return certFile !== undefined
}

/** The address to listen on: empty is bad usage (`--host "$H"` with H unset), not a failure to listen that a service manager restarts. */
export function checkHost(host: string): void {
  if (host.trim() === '') throw new UsageError(`invalid --host '${host}': give a name or address of this machine, like 127.0.0.1, or 0.0.0.0 for every address`)
}

/**
 * The certificate and key (PEM) named by --tls-cert and --tls-key, or undefined for plain HTTP.
 * Both or neither (a usage error); unreadable, not PEM or not a pair: an error naming the file.
 */
export function readTlsFiles(certFile: string | undefined, keyFile: string | undefined): TlsFiles | undefined {
  if (!givesTls(certFile, keyFile)) return undefined
  const cert = readPem('--tls-cert', certFile!)
  const key = readPem('--tls-key', keyFile!)
  let certificate: X509Certificate
  try {
    certificate = new X509Certificate(cert)
  } catch {
    throw new Error(`--tls-cert ${certFile} holds no PEM certificate`)
  }
  let privateKey: KeyObject
  try {
    privateKey = createPrivateKey(key)
  } catch {
    throw new Error(`--tls-key ${keyFile} holds no PEM private key (or one protected by a passphrase)`)
  }
  if (!certificate.checkPrivateKey(privateKey)) throw new Error(`--tls-key ${keyFile} is not the key of the certificate in --tls-cert ${certFile}`)
  return { cert, key }
}

function readPem(flag: string, file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch (error) {
    throw new Error(`cannot read ${flag} ${file}: ${(error as Error).message}`)
  }
}

export interface ReservedPort {
  readonly port: number
  /** Closes the reserving socket (once; later calls do nothing). */
  release(): void
}

/**
 * Binds host:port now, so that a port in use or a bad host fails the start before the data dir is
 * touched, and holds it until the app listens. Elysia's `listen` must bind a socket of its own (it
 * hands the routes to Bun's native router), so `serve` releases this one right before, in the same
 * tick: `--port 0` gets its port here and the app binds that one.
 */
export function reservePort(hostname: string, port: number): ReservedPort {
  let listener: TCPSocketListener
  try {
    // Whoever connects this early is turned away at once.
    listener = Bun.listen({ hostname, port, socket: { open: (socket) => void socket.end(), data: () => {} } })
  } catch (error) {
    throw new Error(`cannot listen on ${hostname}:${port}: ${listenFailure(error, hostname, port)}`)
  }
  let released = false
  return {
    port: listener.port,
    release: () => {
      if (released) return
      released = true
      listener.stop(true)
    },
  }
}

function listenFailure(error: unknown, hostname: string, port: number): string {
  if (isErrnoCode(error, 'EADDRINUSE')) return `port ${port} is already in use`
  if (isErrnoCode(error, 'EADDRNOTAVAIL')) return `${hostname} is not an address of this machine`
  if (isErrnoCode(error, 'EACCES')) return 'permission denied (a port below 1024 needs privileges)'
  return `${(error as Error).message} (is ${hostname} a name or address of this machine?)`
}

/**
 * The TLS 1.2 cipher suites offered: Mozilla's "intermediate" list, forward secrecy and AEAD only
 * (README "Configuration"). Bun's default also offers CBC suites with SHA-1, and RSA key exchange
 * without forward secrecy. TLS 1.3 has only AEAD suites, unaffected; TLS 1.0 and 1.1 Bun refuses.
 */
export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
  'DHE-RSA-AES128-GCM-SHA256',
  'DHE-RSA-AES256-GCM-SHA384',
  'DHE-RSA-CHACHA20-POLY1305',
].join(':')

/**
 * Lets `app` listen on the reserved port (released right before, in the same tick), HTTPS only when
 * `tls` is given; returns the server and the address to announce.
 */
export function listenOnReservedPort(app: App, host: string, reserved: ReservedPort, tls: TlsFiles | undefined) {
  reserved.release()
  // Elysia's listen hands its routes to Bun's native router: cheaper per request than app.fetch,
  // and immune to Elysia's own path parsing, which breaks on a Host shorter than 4 characters.
  // No port sharing (reusePort), no development error pages. Bun's own body limit is set past any
  // length a client sends: a declared length over it is Bun's bare 413 before any route, token or
  // trace id, and keyward's own 64 KiB limit is a problem body in its place in the order of checks
  // (docs/security.md "What keyward bounds"). Bun reads a body only as it is consumed: one keyward refuses is
  // never taken in.
  app.listen({
    hostname: host,
    port: reserved.port,
    ...(tls ? { tls: { ...tls, ciphers: TLS12_CIPHERS } } : {}),
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    development: false,
    reusePort: false,
  })
  const server = app.server!
  const bracketed = host.includes(':') ? `[${host}]` : host
  return { server, address: `${tls ? 'https' : 'http'}://${bracketed}:${server.port}` }
}
