/**
 * Tokens (issue 9, findings 3 and 6): a token has exactly one spelling (CONTRACT section 9), an
 * over-long one is refused without an HMAC, and the verifier's cache keeps only authentic tokens,
 * within a byte budget, forgetting the oldest one at a time.
 */
import { afterEach, describe, expect, spyOn, test } from 'bun:test'
import * as crypto from 'node:crypto'
import { MAX_TOKEN_LENGTH, mintToken, TokenVerifier, verifyToken, type TokenClaims } from '../../src/auth/tokens'
import { authenticate } from '../../src/http/auth'
import type { Reader } from '../../src/storage/storage'

const secret = crypto.randomBytes(32)
const claims = (): TokenClaims => ({ org: crypto.randomUUID(), role: 'viewer', exp: Math.floor(Date.now() / 1000) + 3600 })
const mint = () => mintToken(secret, claims())
/** A valid token whose signature contains `char` (each one has a fair chance to). */
function mintWith(char: string): string {
  for (;;) {
    const token = mint()
    if (token.split('.')[2]!.includes(char)) return token
  }
}

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/**
 * The same signature bytes with the last character's two unused low bits set: 32 bytes fill 42
 * characters and 4 bits of the 43rd, and lenient decoders ignore the rest.
 */
function withTrailingBits(token: string): string {
  const last = token.at(-1)!
  return token.slice(0, -1) + BASE64URL[BASE64URL.indexOf(last) | 3]!
}

let hmac: ReturnType<typeof spyOn<typeof crypto, 'createHmac'>> | undefined
afterEach(() => hmac?.mockRestore())

describe('a token accepts exactly one spelling', () => {
  test('every other spelling of a valid token is refused, by verifyToken and by the verifier', () => {
    const dash = mintWith('-')
    const underscore = mintWith('_')
    const token = mint()
    const spellings = [
      `${token}=`,
      `${token}==`,
      `${token}!`,
      `${token}.`,
      ` ${token}`,
      `${token}\n`,
      dash.replaceAll('-', '+'),
      underscore.replaceAll('_', '/'),
      withTrailingBits(token),
      `${token}${'!'.repeat(15_000)}`,
      `${token}${'A'.repeat(15_000)}`,
      token.toUpperCase(),
      token.replace('kw1.', 'KW1.'),
    ]
    expect(withTrailingBits(token)).not.toBe(token)
    const verifier = new TokenVerifier(secret)
    for (const original of [token, dash, underscore]) expect(verifier.verify(original)).not.toBeNull()
    for (const spelling of spellings) {
      expect({ spelling: spelling.slice(0, 80), ok: verifyToken(secret, spelling) !== null }).toEqual({ spelling: spelling.slice(0, 80), ok: false })
      expect({ spelling: spelling.slice(0, 80), ok: verifier.verify(spelling) !== null }).toEqual({ spelling: spelling.slice(0, 80), ok: false })
    }
  })

  test(`a token longer than ${MAX_TOKEN_LENGTH} characters is refused without computing an HMAC`, () => {
    const verifier = new TokenVerifier(secret)
    const long = `${mint()}${'A'.repeat(MAX_TOKEN_LENGTH)}`
    hmac = spyOn(crypto, 'createHmac')
    expect(verifyToken(secret, long)).toBeNull()
    expect(verifier.verify(long)).toBeNull()
    expect(hmac).toHaveBeenCalledTimes(0)
    // The control: a token of normal length is hashed.
    verifier.verify(mint())
    expect(hmac.mock.calls.length).toBeGreaterThan(0)
  })

  test('an over-long Authorization header is 401 before the verifier sees it', () => {
    class CountingVerifier extends TokenVerifier {
      calls = 0
      override verify(token: string) {
        this.calls++
        return super.verify(token)
      }
    }
    const verifier = new CountingVerifier(secret)
    const tables = { find: () => undefined } as unknown as Reader
    for (const header of [`Bearer ${'a'.repeat(16_000)}`, `Bearer ${mint()}${' '.repeat(1_000)}`, `Bearer${' '.repeat(1_000)}${mint()}`]) {
      expect(() => authenticate(tables, verifier, header)).toThrow(expect.objectContaining({ status: 401 }))
    }
    expect(verifier.calls).toBe(0)
    expect(() => authenticate(tables, verifier, `Bearer ${mint()}`)).toThrow(expect.objectContaining({ status: 401 }))
    expect(verifier.calls).toBe(1)
  })
})

describe("the verifier's cache", () => {
  test('10,000 unique junk tokens leave it empty', () => {
    const verifier = new TokenVerifier(secret)
    const genuine = mint()
    const [, body] = genuine.split('.')
    for (let i = 0; i < 10_000; i++) {
      const junk = [
        // Well formed, signed with another secret: costs an HMAC, leaves nothing.
        mintToken(crypto.randomBytes(32), claims()),
        // The genuine claims with a made-up signature.
        `kw1.${body}.${crypto.randomBytes(32).toString('base64url')}`,
        `junk-${i}-${'x'.repeat(i % 300)}`,
        `kw1.${'A'.repeat(16_000)}.${i}`,
      ][i % 4]!
      expect(verifier.verify(junk)).toBeNull()
    }
    expect(verifier.cached).toEqual({ tokens: 0, bytes: 0 })
    expect(verifier.verify(genuine)).not.toBeNull()
    expect(verifier.cached.tokens).toBe(1)
  })

  test('valid tokens beyond the byte budget keep it within the budget, forgetting the oldest one at a time', () => {
    const budget = 20_000
    const verifier = new TokenVerifier(secret, budget)
    const tokens = Array.from({ length: 500 }, mint)
    let fewest = Infinity
    for (const [i, token] of tokens.entries()) {
      expect(verifier.verify(token)).not.toBeNull()
      const { tokens: held, bytes } = verifier.cached
      expect(bytes).toBeLessThanOrEqual(budget)
      if (i >= 100) fewest = Math.min(fewest, held)
    }
    // Full from well before the 100th token on, and never emptied: each new token displaces about one old one.
    const perToken = verifier.cached.bytes / verifier.cached.tokens
    expect(fewest).toBeGreaterThanOrEqual(Math.floor(budget / perToken) - 1)
    // The newest are still cached (no HMAC to verify them again), the oldest are not.
    hmac = spyOn(crypto, 'createHmac')
    for (const token of tokens.slice(-10)) expect(verifier.verify(token)).not.toBeNull()
    expect(hmac).toHaveBeenCalledTimes(0)
    expect(verifier.verify(tokens[0]!)).not.toBeNull()
    expect(hmac).toHaveBeenCalledTimes(1)
  })

  test('an authentic but expired token is cached and still refused', () => {
    const verifier = new TokenVerifier(secret)
    const expired = mintToken(secret, { ...claims(), exp: Math.floor(Date.now() / 1000) - 1 })
    expect(verifier.verify(expired)).toBeNull()
    expect(verifier.verify(expired)).toBeNull()
    expect(verifier.cached.tokens).toBe(1)
  })
})
