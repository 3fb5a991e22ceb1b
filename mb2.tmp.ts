import { createLogger } from './src/ops/logger'
const logger = createLogger('json')
const N = 400000
const org = crypto.randomUUID(), tok = crypto.randomUUID()
const t0 = performance.now()
for (let b = 0; b < N / 200; b++) {
  for (let i = 0; i < 200; i++) logger.request({ method: 'GET', route: '/api/organizations/:organization_id', status: 200, durationMs: Math.round(Math.random() * 1e5) / 1000, traceId: crypto.randomUUID(), organizationId: org, tokenId: tok, bytesOut: 600 + i })
  await new Promise((r) => setImmediate(r))
}
await logger.flush()
const r = process.resourceUsage()
console.log('cpu µs/line', ((r.userCPUTime + r.systemCPUTime) / N).toFixed(3), 'wall', ((performance.now() - t0) * 1000 / N).toFixed(3))
