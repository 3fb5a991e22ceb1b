/**
 * Comments cite the repository's own docs: every `docs/<file>.md "Section"` and `README "Section"`
 * in src/, test/ and bench/ names a heading of that file, or one of its bold paragraph labels
 * (`**Plans.**`), so that a renamed section cannot leave a citation pointing nowhere.
 */
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

const ROOT = join(import.meta.dir, '../..')

/** A document's section names: its headings and bold paragraph labels. */
function sectionsOf(file: string): Set<string> {
  const text = readFileSync(join(ROOT, file), 'utf8')
  const names = new Set<string>()
  for (const [, heading] of text.matchAll(/^#{1,6} (.+)$/gm)) names.add(heading!.trim())
  for (const [, label] of text.matchAll(/\*\*([^*]+?)\.?\*\*/g)) names.add(label!.trim())
  return names
}

test('every docs/… "Section" and README "Section" a comment cites is a section of that file', () => {
  const files = new Bun.Glob('{src,test,bench}/**/*.ts').scanSync({ cwd: ROOT })
  const sections = new Map<string, Set<string>>()
  const missing: string[] = []
  let cited = 0
  for (const file of files) {
    if (file === 'test/unit/doc-citations.test.ts') continue // its own examples
    const text = readFileSync(join(ROOT, file), 'utf8')
    // A file name, then one or more quoted section names (`docs/api.md "Tokens" and "Audit events"` counts the first).
    for (const match of text.matchAll(/\b(README|docs\/[\w-]+\.md)[,:]? "([^"\n]+)"/g)) {
      const document = match[1] === 'README' ? 'README.md' : match[1]!
      if (!sections.has(document)) sections.set(document, sectionsOf(document))
      cited++
      const name = match[2]!
      const known = sections.get(document)!
      if (![...known].some((section) => section === name || /^ \(/.test(section.slice(name.length)) && section.startsWith(name))) missing.push(`${file}: ${document} "${name}"`)
    }
  }
  expect(cited).toBeGreaterThan(100)
  expect(missing).toEqual([])
})
