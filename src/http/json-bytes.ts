/**
 * A list's answer too big to make into one string at once (docs/security.md, "Big answers"): its
 * items' JSON texts written into one buffer of its UTF-8 bytes a turn of the event loop at a time,
 * instead of joined into a string and encoded in a single turn.
 */
import { then, type Maybe } from '../storage/storage'
import { mapInTurns, newSlice, type Slice } from '../ops/turns'

/** Answers of more characters than this are written in turns (a page of small records never is). */
export const BYTES_IN_TURNS_ABOVE_CHARS = 1 << 20

export class JsonBytes {
  constructor(readonly bytes: Uint8Array) {}

  /** `head`, the items separated by commas, and `tail`, as UTF-8 written in turns (of `slice`: the answer's). */
  static of(head: string, items: readonly string[], tail: string, slice: Slice = newSlice()): Maybe<JsonBytes> {
    return then(mapInTurns(items, (item) => Buffer.byteLength(item), slice), (lengths) => {
      let size = Buffer.byteLength(head) + Buffer.byteLength(tail) + Math.max(0, items.length - 1)
      for (const length of lengths) size += length
      const body = Buffer.allocUnsafe(size)
      let at = body.write(head, 0)
      let index = 0
      const written = mapInTurns(
        items,
        (item) => {
          if (index++ > 0) at += body.write(',', at)
          at += body.write(item, at)
          return at
        },
        slice,
      )
      return then(written, () => {
        body.write(tail, at)
        return new JsonBytes(body)
      })
    })
  }
}
