/**
 * Tokens (docs/api.md "Tokens"): a token has exactly
 * one spelling, an over-long one is refused without a hash, and the verifier's cache keeps only
 * strings that verified, within a byte budget, forgetting the oldest one at a time; it never answers
 * for the record (a revoked or expired token is refused however cached it is).
 */
import { afterEach, describe, expect, spyOn, test } from 'bun:test'
import * as crypto from 'node:crypto'
import { hashToken, newToken, TOKEN_LENGTH, tokenIdOf, TokenVerifier } from '../../src/auth/tokens'
import { authenticate } from '../../src/http/auth'
import type { Organization, Token } from '../../src/storage/records'
import type { Reader } from '../../src/storage/storage'

const vendor: Organization = {
  organization_id: crypto.randomUUID(),
  parent_id: null,
  organization_type: 'vendor',
  description: 'Vendor',
  state: 'active',
  environments: null,
  created: 1,
  modified: 1,
}

/** A token and its record (active, an hour left). */
function issue(): { token: string; record: Token } {
  const { tokenId, token, tokenHash } = newToken()
  const record: Token = {
    token_id: tokenId,
    organization_id: vendor.organization_id,
    role: 'viewer',
    description: null,
    state: 'active',
    expires: (Date.now() + 3600_000) * 1000,
    token_hash: tokenHash,
    created: 1,
    modified: 1,
  }
  return { token, record }
}

/** A token whose secret part contains `char` (each one has a fair chance to). */
function issueWith(char: string) {
  for (;;) {
    const issued = issue()
    if (issued.token.slice(37).includes(char)) return issued
  }
}

/** What authentication reads: these token records and the vendor. */
function readerOf(records: Token[]): Reader {
  const byId = new Map(records.map((r) => [r.token_id, r]))
  const findCredential = (id: string) => {
    const token = byId.get(id)
    return token && { token, organization: token.organization_id === vendor.organization_id ? vendor : undefined, parent: undefined }
  }
  return { findCredential, mark: () => 0, now: () => Date.now() * 1000 } as unknown as Reader
}

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'

/**
 * The same secret bytes with the last character's two unused low bits set: 32 bytes fill 42
 * characters and 4 bits of the 43rd, and lenient decoders ignore the rest.
 */
function withTrailingBits(token: string): string {
  const last = token.at(-1)!
  return token.slice(0, -1) + BASE64URL[BASE64URL.indexOf(last) | 3]!
}

const accepted = (reader: Reader, verifier: TokenVerifier, token: string) => {
  try {
    authenticate(reader, verifier, `Bearer ${token}`)
    return true
  } catch (error) {
    expect(error).toMatchObject({ status: 401 })
    return false
  }
}

let hash: ReturnType<typeof spyOn<typeof crypto, 'createHash'>> | undefined
afterEach(() => hash?.mockRestore())

describe('a token accepts exactly one spelling', () => {
  test('every other spelling of a valid token is refused', () => {
    const dash = issueWith('-')
    const underscore = issueWith('_')
    const plain = issue()
    const token = plain.token
    const spellings = [
      `${token}=`,
      `${token}==`,
      `${token}!`,
      `${token}.`,
      ` ${token}`,
      `${token}\n`,
      dash.token.replaceAll('-', '+'),
      underscore.token.slice(0, 37) + underscore.token.slice(37).replaceAll('_', '/'),
      withTrailingBits(token),
      `${token}${'!'.repeat(15_000)}`,
      `${token}${'A'.repeat(15_000)}`,
      token.toUpperCase(),
      token.replace('kw2_', 'KW2_'),
      token.replace(tokenIdOf(token)!.replaceAll('-', ''), tokenIdOf(token)!.replaceAll('-', '').toUpperCase()),
    ]
    expect(withTrailingBits(token)).not.toBe(token)
    const reader = readerOf([dash.record, underscore.record, plain.record])
    const verifier = new TokenVerifier()
    for (const original of [token, dash.token, underscore.token]) expect(accepted(reader, verifier, original)).toBe(true)
    const records = new Map([dash, underscore, plain].map(({ record }) => [record.token_id, record]))
    for (const spelling of spellings) {
      // As a token (what the string names and hashes to), and in a header (where blanks around the
      // token belong to the header's syntax, so ` ${token}` is the token itself there).
      const id = tokenIdOf(spelling)
      const asToken = id !== null && records.has(id) && verifier.verify(spelling, records.get(id)!)
      const inHeader = spelling.trimStart() !== spelling ? false : accepted(reader, verifier, spelling)
      expect({ spelling: spelling.slice(0, 90), asToken, inHeader }).toEqual({ spelling: spelling.slice(0, 90), asToken: false, inHeader: false })
    }
  })

  test(`a token longer than ${TOKEN_LENGTH} characters is refused without computing a hash`, () => {
    const { token, record } = issue()
    const reader = readerOf([record])
    const verifier = new TokenVerifier()
    const long = `${token}${'A'.repeat(TOKEN_LENGTH)}`
    hash = spyOn(crypto, 'createHash')
    expect(tokenIdOf(long)).toBeNull()
    expect(accepted(reader, verifier, long)).toBe(false)
    expect(hash).toHaveBeenCalledTimes(0)
    // The control: the token itself is hashed.
    expect(accepted(reader, verifier, token)).toBe(true)
    expect(hash.mock.calls.length).toBeGreaterThan(0)
  })

  test('a well-formed token of an unknown id costs one hash, as one of a known id with a wrong secret does (a 401 does not time which ids exist)', () => {
    const { token, record } = issue()
    const reader = readerOf([record])
    const wrongSecret = `${token.slice(0, 37)}${crypto.randomBytes(32).toString('base64url')}`
    const unknownId = newToken().token
    const hashesFor = (presented: string) => {
      hash = spyOn(crypto, 'createHash')
      expect(accepted(reader, new TokenVerifier(), presented)).toBe(false)
      const calls = hash.mock.calls.length
      hash.mockRestore()
      hash = undefined
      return calls
    }
    expect(hashesFor(unknownId)).toBe(hashesFor(wrongSecret))
    expect(hashesFor(wrongSecret)).toBeGreaterThan(0)
  })

  test('an over-long Authorization header is 401 before the verifier sees it', () => {
    class CountingVerifier extends TokenVerifier {
      calls = 0
      override verify(token: string, record: Token) {
        this.calls++
        return super.verify(token, record)
      }
    }
    const { token, record } = issue()
    const verifier = new CountingVerifier()
    const reader = readerOf([record])
    for (const header of [`Bearer ${'a'.repeat(16_000)}`, `Bearer ${token}${' '.repeat(1_000)}`, `Bearer${' '.repeat(1_000)}${token}`]) {
      expect(() => authenticate(reader, verifier, header)).toThrow(expect.objectContaining({ status: 401 }))
    }
    expect(verifier.calls).toBe(0)
    expect(authenticate(reader, verifier, `Bearer ${token}`)).toMatchObject({ tokenId: record.token_id, role: 'viewer' })
    expect(verifier.calls).toBe(1)
  })
})

describe("the verifier's cache", () => {
  test('10,000 unique junk tokens leave it empty', () => {
    const verifier = new TokenVerifier()
    const { token: genuine, record } = issue()
    const id = genuine.slice(0, 37)
    for (let i = 0; i < 10_000; i++) {
      const junk = [
        // Well formed, this record's id, another secret: costs a hash, leaves nothing.
        `${id}${crypto.randomBytes(32).toString('base64url')}`,
        // Another token altogether.
        newToken().token,
        `junk-${i}-${'x'.repeat(i % 300)}`,
        `${genuine}${'A'.repeat(i % 500)}`,
      ][i % 4]!
      expect(verifier.verify(junk, record)).toBe(false)
    }
    expect(verifier.cached).toEqual({ tokens: 0, bytes: 0 })
    expect(verifier.verify(genuine, record)).toBe(true)
    expect(verifier.cached.tokens).toBe(1)
  })

  test('valid tokens beyond the byte budget keep it within the budget, forgetting the oldest one at a time', () => {
    const budget = 20_000
    const verifier = new TokenVerifier(budget)
    const issued = Array.from({ length: 500 }, issue)
    let fewest = Infinity
    for (const [i, { token, record }] of issued.entries()) {
      expect(verifier.verify(token, record)).toBe(true)
      const { tokens: held, bytes } = verifier.cached
      expect(bytes).toBeLessThanOrEqual(budget)
      if (i >= 100) fewest = Math.min(fewest, held)
    }
    // Full from well before the 100th token on, and never emptied: each new token displaces about one old one.
    const perToken = verifier.cached.bytes / verifier.cached.tokens
    expect(fewest).toBeGreaterThanOrEqual(Math.floor(budget / perToken) - 1)
    // The newest are still cached (no hash to verify them again), the oldest are not.
    hash = spyOn(crypto, 'createHash')
    for (const { token, record } of issued.slice(-10)) expect(verifier.verify(token, record)).toBe(true)
    expect(hash).toHaveBeenCalledTimes(0)
    expect(verifier.verify(issued[0]!.token, issued[0]!.record)).toBe(true)
    expect(hash).toHaveBeenCalledTimes(1)
  })

  test('a cached token whose record is revoked or expired is refused: the cache answers only for the hash', () => {
    const { token, record } = issue()
    const verifier = new TokenVerifier()
    expect(accepted(readerOf([record]), verifier, token)).toBe(true)
    expect(verifier.cached.tokens).toBe(1)
    expect(accepted(readerOf([{ ...record, state: 'revoked' }]), verifier, token)).toBe(false)
    expect(accepted(readerOf([{ ...record, expires: Date.now() * 1000 - 1 }]), verifier, token)).toBe(false)
    // And a record whose hash is another's (a different token under this id) is refused too.
    expect(accepted(readerOf([{ ...record, token_hash: hashToken(newToken().token) }]), verifier, token)).toBe(false)
    expect(accepted(readerOf([record]), verifier, token)).toBe(true)
  })

  test("a cached token's id is the one its string carries, and junk still has none", () => {
    const { token, record } = issue()
    const verifier = new TokenVerifier()
    expect(verifier.tokenIdOf(token)).toBe(record.token_id)
    expect(verifier.verify(token, record)).toBe(true)
    expect(verifier.tokenIdOf(token)).toBe(record.token_id)
    expect(verifier.tokenIdOf(`${token}=`)).toBeNull()
    const other = newToken()
    expect(verifier.tokenIdOf(other.token)).toBe(other.tokenId)
  })
})
