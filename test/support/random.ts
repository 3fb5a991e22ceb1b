/**
 * Randomness for the load run and the crash loop: seeded, so a failing run can be repeated (and a
 * fresh P-256 client key, which is not).
 */
import { generateKeyPairSync } from 'node:crypto'

function mulberry32(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export class Random {
  private readonly next: () => number
  constructor(seed: number) {
    this.next = mulberry32(seed)
  }
  float(): number {
    return this.next()
  }
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!
  }
  uuid(): string {
    const hex = Array.from({ length: 32 }, () => Math.floor(this.next() * 16).toString(16)).join('')
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${'89ab'[Math.floor(this.next() * 4)]}${hex.slice(17, 20)}-${hex.slice(20, 32)}`
  }
  subset<T>(items: readonly T[]): T[] {
    const chosen = items.filter(() => this.chance(0.5))
    return chosen.length > 0 ? chosen : [this.pick(items)]
  }
}

/** A fresh P-256 public key: its SPKI DER, and the forms a client may send it in. */
export function p256Key() {
  const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const der = publicKey.export({ type: 'spki', format: 'der' }) as Buffer
  return { der, base64: der.toString('base64'), base64url: der.toString('base64url'), pem: publicKey.export({ type: 'spki', format: 'pem' }) as string }
}

/** A fresh P-256 public key, as the API takes it: standard base64 of the SPKI DER. */
export const newClientKey = (): string => p256Key().base64
