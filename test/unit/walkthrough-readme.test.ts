/**
 * The README's "The API by example" shows docs/walkthrough.sh, which CI runs against the binary:
 * the two must not drift apart.
 */
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

const ROOT = join(import.meta.dir, '../..')

test("the README's example block is docs/walkthrough.sh (without its #! line)", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('## The API by example'))
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1]
  const script = readFileSync(join(ROOT, 'docs/walkthrough.sh'), 'utf8')
  expect(script.startsWith('#!/usr/bin/env bash\n')).toBe(true)
  expect(block).toBe(script.slice(script.indexOf('\n') + 1))
})
