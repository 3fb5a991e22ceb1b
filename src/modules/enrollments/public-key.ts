/**
 * Client enclave keys: a P-256 public key as base64 or base64url SPKI DER, or a PEM `PUBLIC KEY`
 * block. WebCrypto decides whether it really is one; the canonical form is standard base64 DER.
 */
import { badRequest } from '../shared/errors'

const PEM = /^-----BEGIN PUBLIC KEY-----([A-Za-z0-9+/=\s]+)-----END PUBLIC KEY-----\s*$/
const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/

export async function parseP256PublicKey(text: string): Promise<string> {
  const trimmed = text.trim()
  const pem = PEM.exec(trimmed)
  const encoded = pem ? pem[1]!.replace(/\s+/g, '') : trimmed
  if (!BASE64.test(encoded)) throw invalidKey('it is not base64, base64url or a PEM PUBLIC KEY block')
  const der = Buffer.from(encoded, 'base64')
  try {
    const key = await crypto.subtle.importKey('spki', der, { name: 'ECDSA', namedCurve: 'P-256' }, true, ['verify'])
    return Buffer.from(await crypto.subtle.exportKey('spki', key)).toString('base64')
  } catch {
    throw invalidKey('it is not an SPKI-encoded P-256 public key')
  }
}

const invalidKey = (why: string) =>
  badRequest('invalid_public_key', `client_enclave_key is not usable: ${why}.`, [{ path: 'body.client_enclave_key', message: why }])
