/** Files embedded with `import path from '...' with { type: 'file' }` (see src/http/docs-page.ts). */
declare module '*/standalone.js' {
  const path: string
  export default path
}
