#!/usr/bin/env bun
/**
 * Hand-run abuse benchmark (docs/abuse.md; not a test, not in CI):
 *
 *   npm run bench -- abuse [--seconds 10] [--rate 200] [--keysets 10000] [--only TEXT[|TEXT...]] [--repeat N]
 *                                              [--memory-limit MIB]
 *
 * Can one tenant, or someone with no token at all, slow another tenant down or blow up the server's
 * memory? A real server (`bun run src/main.ts serve`, with rate limits off where it has them, on a
 * data dir built through the storage interface, bench/support/dataset.ts) holds three customers:
 *
 *   victim    1 application, 200 enrollments; reads one enrollment by id with a viewer token
 *   attacker  2 applications of 20,000 enrollments each (40,000 enrollments, consumers and
 *             installations in its scope), a partner, one enrollment with --keysets keysets, and
 *             1,000 installations whose descriptions are 6 KB of JSON each, with their audit events
 *   prober    1 application, 10 enrollments; a viewer that names the attacker's application
 *
 * The victim sends GET /api/enrollments/{id} at a steady --rate per second (open loop: a request
 * is due every 1/rate s whether or not the last one has answered; latency counts from when it was
 * due), first alone, then while each abusive pattern of docs/security.md runs in turn on 4 wrk connections
 * with the weakest token that can send it (bench/abuse.lua). For each: the victim's p50, p99 and
 * max, the attacker's answers per second and their statuses, and the server's highest VmRSS.
 * Each row runs on a freshly started server, in a memory cgroup limited to --memory-limit MiB (default
 * 1024: a server in a 1 GiB container, as docs/abuse.md puts it; 0: no limit), since the JavaScript engine
 * sizes its garbage collector's headroom by the memory it finds (docs/security.md, "Memory under a
 * flood"). Making the cgroup needs root; without one the run says so and goes on without a limit.
 * Goal (docs/abuse.md): victim p50 within 3x unloaded, p99 under 50 ms, RSS within +100 MiB of unloaded.
 *
 * Writes docs/abuse.md (docs/abuse-no-memory-limit.md with --memory-limit 0) and prints it (a
 * partial or repeated run only prints its tables: one per round, each pattern against the unloaded
 * row of its own round, since the peaks move by some 40 MiB between runs). Needs wrk on the PATH.
 * The server, the cgroup and the temp dir are removed at the end, also on failure or Ctrl-C.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { loadavg, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { benchmarkOptions } from '../support/options'
import { buildInChild, ENVIRONMENT, openStorage, type BuildMeta, type CustomerPlan } from '../support/dataset'
import { benchServeOptions, initStore, issueToken, startKeyward, type Target } from '../support/keyward'
import { ROOT } from '../../test/support/server-process'
import { Children, onInterrupt } from '../support/servers'
import { busyBeforeStart, machineDescription, memoryCgroup, mib, procStatus, waitQuiet, type MemoryCgroup } from '../support/system'
import { startWrk, wrkMissing, type WrkResult } from '../support/wrk'
import { recordEvent } from '../../src/modules/shared/audit'
import { MAX_KEYSETS_PER_ENROLLMENT } from '../../src/modules/shared/limits'

const values = benchmarkOptions('abuse', {
  seconds: { type: 'string', default: '10' },
  rate: { type: 'string', default: '200' },
  keysets: { type: 'string', default: String(MAX_KEYSETS_PER_ENROLLMENT) },
  /** Only the patterns whose name holds this text, or one of these `|`-separated texts (the unloaded row always runs); for trying a fix. */
  only: { type: 'string' },
  /** Rounds of the unloaded row and the patterns, on one data dir: to tell a fix from the noise. */
  repeat: { type: 'string', default: '1' },
  /** The server's memory limit in MiB (a cgroup's), or 0 for none. */
  'memory-limit': { type: 'string', default: '1024' },
})
const MEASURE_SECONDS = Number(values.seconds)
const VICTIM_RATE = Number(values.rate)
const KEYSETS = Number(values.keysets)
const ROUNDS = Number(values.repeat)
const MEMORY_LIMIT_MIB = Number(values['memory-limit'])
for (const [name, value, min, max] of [
  ['seconds', MEASURE_SECONDS, 1, 600],
  ['rate', VICTIM_RATE, 1, 5000],
  ['keysets', KEYSETS, 1, MAX_KEYSETS_PER_ENROLLMENT],
  ['repeat', ROUNDS, 1, 20],
  ['memory-limit', MEMORY_LIMIT_MIB, 0, 1_048_576],
] as const) {
  if (!Number.isInteger(value) || value < min || value > max) throw new Error(`--${name} must be an integer from ${min} to ${max}`)
}
/** The attacker's installations of the big answers, and their description (6 KB of JSON). */
const HEAVY_INSTALLATIONS = 1000
const HEAVY_DESCRIPTION = 'a' + '\u0001'.repeat(1023)
/** The attack runs this long before the victim's measurement starts. */
const WARMUP_SECONDS = 2
const ATTACK_CONNECTIONS = 4
const GOAL = { p50Factor: 3, p99Ms: 50, rssMiB: 100 }
const REPORT = join(ROOT, 'docs', MEMORY_LIMIT_MIB === 0 ? 'abuse-no-memory-limit.md' : 'abuse.md')
const children = new Children()
let workDir: string | undefined
let cgroup: MemoryCgroup | null = null

// ---------------------------------------------------------------------------------------------
// The data: built through the store, then partners and keysets added the way the services make them

interface World {
  readonly dir: string
  readonly victimToken: string
  readonly victimEnrollment: string
  readonly attackerToken: string
  /** A viewer of the attacker customer itself: a partner reads no audit trail. */
  readonly attackerCustomerToken: string
  readonly attacker: string
  readonly attackerApplication: string
  readonly keysetEnrollment: string
  readonly proberToken: string
  readonly records: number
}

const customerPlan = (description: string, applications: number, enrollments: number): CustomerPlan => ({
  description,
  applications,
  enrollments,
  enrollmentsPerConsumer: 1,
  spareConsumerEvery: 0,
})

async function buildWorld(work: string): Promise<World> {
  const target: Target = { store: 'embedded', dir: join(work, 'data') }
  const { organization_id: vendorId } = await initStore(target)
  const meta: BuildMeta = await buildInChild(
    { target, vendorId, label: 'abuse', customers: [customerPlan('Victim', 1, 200), customerPlan('Attacker', 2, 40_000), customerPlan('Prober', 1, 10)] },
    { planFile: join(work, 'plan.json'), metaFile: join(work, 'meta.json') },
    (cmd, options) => children.spawn(cmd, options),
  )
  const [victim, attacker, prober] = meta.customers as [BuildMeta['customers'][number], BuildMeta['customers'][number], BuildMeta['customers'][number]]

  // A partner of the attacker (its weakest token reads everything the customer owns) and the
  // keysets, through the storage interface as the services make them: each new keyset active, the
  // one before it retired, the enrollment pointing at the newest.
  const { storage, close } = await openStorage(target)
  const partner = await storage.transaction((tx) =>
    tx.insert('organizations', {
      organization_id: crypto.randomUUID(),
      parent_id: attacker.organizationId,
      organization_type: 'partner',
      description: 'Attacker partner',
      state: 'active',
      environments: null,
    }),
  )
  const keysetEnrollment = attacker.middleEnrollmentId!
  const keysetApplication = (await storage.find('enrollments', keysetEnrollment))!.application_id
  const key = await publicKey()
  let previous: string | null = null
  for (let done = 0; done < KEYSETS; ) {
    const batch = Math.min(1000, KEYSETS - done)
    previous = await storage.transaction(async (tx) => {
      let last = previous
      for (let i = 0; i < batch; i++) {
        if (last) await tx.update('keysets', last, { state: 'retired' })
        const keyset = await tx.insert('keysets', {
          keyset_id: crypto.randomUUID(),
          enrollment_id: keysetEnrollment,
          application_id: keysetApplication,
          environment: ENVIRONMENT,
          client_enclave_key: key,
          state: 'active',
        })
        last = keyset.keyset_id
      }
      await tx.update('enrollments', keysetEnrollment, { active_keyset_id: last, client_enclave_key: key })
      return last
    })
    done += batch
  }
  // Big answers (docs/security.md): installations whose description is 1,023 × U+0001, 6 KB of
  // JSON each, with the events the services record for them (each holds the description too).
  await storage.transaction(async (tx) => {
    for (let i = 0; i < HEAVY_INSTALLATIONS; i++) {
      const installation = await tx.insert('installations', { installation_id: crypto.randomUUID(), organization_id: attacker.organizationId, description: HEAVY_DESCRIPTION, state: 'unregistered' })
      recordEvent(tx, { cli: 'bench' }, 'installation.create', { target: installation.installation_id, customerId: attacker.organizationId, before: null, after: installation })
    }
  })
  await close()

  const token = (org: string, role: string) => issueToken(target, org, role)
  return {
    dir: target.dir,
    victimToken: await token(victim.organizationId, 'viewer'),
    victimEnrollment: victim.middleEnrollmentId!,
    attackerToken: await token(partner.organization_id, 'viewer'),
    attackerCustomerToken: await token(attacker.organizationId, 'viewer'),
    attacker: attacker.organizationId,
    attackerApplication: attacker.applicationIds[0]!,
    keysetEnrollment,
    proberToken: await token(prober.organizationId, 'viewer'),
    records: meta.records + 1 + KEYSETS + 2 * HEAVY_INSTALLATIONS,
  }
}

/** One real P-256 public key, as the service stores it (base64 SPKI). */
async function publicKey(): Promise<string> {
  const pair = (await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify'])) as CryptoKeyPair
  return Buffer.from(await crypto.subtle.exportKey('spki', pair.publicKey)).toString('base64')
}

// ---------------------------------------------------------------------------------------------
// The abusive patterns (docs/security.md), each with the weakest token that can send it

interface Pattern {
  readonly name: string
  /** Who sends it. */
  readonly sender: string
  readonly env: Record<string, string>
}

function patterns(w: World): Pattern[] {
  const attacker = { ABUSE_TOKEN: w.attackerToken }
  return [
    { name: 'query of 7,900 `&x` (15.8 KB) on a list', sender: 'attacker partner viewer', env: { ...attacker, ABUSE_PATHS: `/api/consumers?${'&x'.repeat(7_900)}` } },
    {
      name: "`application_ids=<another tenant's app>` (20,000 enrollments) on consumers and installations",
      sender: 'prober viewer',
      env: { ABUSE_TOKEN: w.proberToken, ABUSE_PATHS: `/api/consumers?application_ids=${w.attackerApplication}|/api/installations?application_ids=${w.attackerApplication}` },
    },
    { name: 'unique 16 KB junk tokens', sender: 'no token', env: { ABUSE_PATHS: '/api/organizations', ABUSE_JUNK: '16000' } },
    { name: '64 KiB `[[[...` bodies', sender: 'no token', env: { ABUSE_PATHS: '/api/organizations', ABUSE_BODY: String(64 * 1024) } },
    {
      name: '430 duplicate `organization_ids` (comma-separated)',
      sender: 'attacker partner viewer',
      env: { ...attacker, ABUSE_PATHS: `/api/consumers?organization_ids=${Array(430).fill(w.attacker).join(',')}` },
    },
    { name: '7,000 bad ids in one filter', sender: 'attacker partner viewer', env: { ...attacker, ABUSE_PATHS: `/api/consumers?organization_ids=${'x,'.repeat(7_000)}` } },
    { name: 'state-only filter over a 40,000-enrollment scope', sender: 'attacker partner viewer', env: { ...attacker, ABUSE_PATHS: '/api/enrollments?state=suspended' } },
    {
      name: `the newest 1,000 audit events, 6 KB each (descriptions of 1,023 × U+0001)`,
      sender: 'attacker customer viewer',
      env: { ABUSE_TOKEN: w.attackerCustomerToken, ABUSE_PATHS: '/api/audit-events?page_size=1000&order=desc' },
    },
    {
      name: `the whole keyset list of an enrollment with ${KEYSETS.toLocaleString('en')} keysets`,
      sender: 'attacker partner viewer',
      env: { ...attacker, ABUSE_PATHS: `/api/enrollments/${w.keysetEnrollment}/keysets` },
    },
  ]
}

// ---------------------------------------------------------------------------------------------
// Measuring

interface VictimFigures {
  readonly samples: number
  readonly failures: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

/** The victim's reads at a steady rate for `seconds`; latency from when each request was due. */
async function victim(url: string, token: string, seconds: number): Promise<VictimFigures> {
  const headers = { authorization: `Bearer ${token}` }
  const latencies: number[] = []
  let failures = 0
  const pending: Promise<void>[] = []
  const start = performance.now()
  const count = Math.floor(seconds * VICTIM_RATE)
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / VICTIM_RATE
    const wait = due - performance.now()
    if (wait > 0) await Bun.sleep(wait)
    // From when it was due if the loop is late (a stalled server delays the next send too), from
    // when it was sent if the timer woke early.
    const from = Math.min(due, performance.now())
    pending.push(
      fetch(url, { headers })
        .then(async (response) => {
          await response.arrayBuffer()
          if (response.status !== 200) failures++
        })
        .catch(() => void failures++)
        .finally(() => void latencies.push(performance.now() - from)),
    )
  }
  await Promise.all(pending)
  latencies.sort((a, b) => a - b)
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!
  return { samples: latencies.length, failures, p50: at(0.5), p99: at(0.99), max: latencies.at(-1)! }
}

/** The highest VmRSS of `pid` until `until` settles, sampled every 200 ms. */
async function peakRss(pid: number, until: Promise<unknown>): Promise<number> {
  let peak = await procStatus(pid, 'VmRSS')
  let settled = false
  void until.finally(() => (settled = true))
  while (!settled) {
    await Bun.sleep(200)
    peak = Math.max(peak, await procStatus(pid, 'VmRSS'))
  }
  return peak
}

interface Row {
  readonly pattern: Pattern | null
  readonly victim: VictimFigures
  readonly rss: number
  readonly attack: WrkResult | null
}

async function measure(wrk: string, base: string, pid: number, w: World, pattern: Pattern | null): Promise<Row> {
  const victimUrl = `${base}/api/enrollments/${w.victimEnrollment}`
  const attack = pattern
    ? startWrk(wrk, ['-c', String(ATTACK_CONNECTIONS), '-d', `${WARMUP_SECONDS + MEASURE_SECONDS + 1}s`, '-s', join(import.meta.dir, '..', 'abuse.lua'), base], {
        threads: 2,
        timeoutSeconds: 10,
        env: { ...process.env, ...pattern.env },
        spawn: (cmd, options) => children.spawn(cmd, options),
      })
    : null
  if (attack) await Bun.sleep(WARMUP_SECONDS * 1000)
  const reading = victim(victimUrl, w.victimToken, MEASURE_SECONDS)
  const [figures, rss] = await Promise.all([reading, peakRss(pid, reading)])
  attack?.stop()
  const result = attack ? await attack.result : null
  return { pattern, victim: figures, rss, attack: result }
}

/** One request of each pattern, to show what it is answered (and to fail early if one is wrong). */
async function probe(base: string, pattern: Pattern): Promise<string> {
  const env = pattern.env
  const path = env.ABUSE_PATHS!.split('|')[0]!
  const headers: Record<string, string> = {}
  if (env.ABUSE_TOKEN) headers.authorization = `Bearer ${env.ABUSE_TOKEN}`
  if (env.ABUSE_JUNK) headers.authorization = `Bearer ${'J'.repeat(Number(env.ABUSE_JUNK))}`
  const body = env.ABUSE_BODY ? '['.repeat(Number(env.ABUSE_BODY)) : undefined
  if (body) headers['content-type'] = 'application/json'
  const response = await fetch(`${base}${path}`, { method: body ? 'POST' : 'GET', headers, body })
  const text = await response.text()
  let code = ''
  try {
    code = (JSON.parse(text) as { code?: string }).code ?? ''
  } catch {}
  const size = text.length < 10_240 ? `${text.length} bytes` : `${Math.round(text.length / 1024)} KiB`
  return `${response.status}${code ? ` ${code}` : ''}, ${size}`
}

// ---------------------------------------------------------------------------------------------
// The report

function report(w: World, rows: Row[], answers: Map<Pattern, string>, started: Date, busy: string | null, serveNote: string, memoryNote: string): string {
  const unloaded = rows[0]!
  const loadAverage = loadavg()
    .map((x) => x.toFixed(1))
    .join(', ')
  const ms = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2))
  const verdict = (row: Row) => {
    const misses: string[] = []
    if (row.victim.p50 > GOAL.p50Factor * unloaded.victim.p50) misses.push(`p50 ${(row.victim.p50 / unloaded.victim.p50).toFixed(1)}×`)
    if (row.victim.p99 >= GOAL.p99Ms) misses.push('p99')
    if (row.rss - unloaded.rss > GOAL.rssMiB * 2 ** 20) misses.push('RSS')
    if (row.victim.failures > 0) misses.push(`${row.victim.failures} failed reads`)
    return misses.length === 0 ? 'met' : `**missed** (${misses.join(', ')})`
  }
  const lines = rows.map((row) => {
    const a = row.attack
    const attack = a ? `${Math.round(a.rps).toLocaleString('en')}/s; ${answers.get(row.pattern!)}` : '–'
    const rss = `${mib(row.rss)}${row === unloaded ? '' : ` (${row.rss >= unloaded.rss ? '+' : ''}${mib(row.rss - unloaded.rss)})`}`
    const name = row.pattern ? `${row.pattern.name} (${row.pattern.sender})` : 'unloaded'
    return `| ${name} | ${attack} | ${ms(row.victim.p50)} | ${ms(row.victim.p99)} | ${ms(row.victim.max)} | ${rss} | ${row === unloaded ? '' : verdict(row)} |`
  })
  return `# Abuse benchmark

\`npm run bench -- abuse\` on ${started.toISOString().slice(0, 10)}, ${machineDescription()}. The server is the real one
(\`serve\` with ${serveNote}, ${memoryNote}, started afresh for each row, on a data dir built through the storage interface, ${w.records.toLocaleString('en')} records): a victim customer, an
attacker customer (2 applications of 20,000 enrollments each, so 40,000 enrollments, consumers and installations in
its scope; one enrollment with ${KEYSETS.toLocaleString('en')} keysets; a partner) and a prober customer. The victim reads one enrollment
by id with a viewer token at ${VICTIM_RATE} requests per second, open loop (latency counted from when each request was due),
for ${MEASURE_SECONDS} s: alone, then while each abusive pattern runs on ${ATTACK_CONNECTIONS} wrk connections (after ${WARMUP_SECONDS} s of warm-up) with the
weakest token that can send it. wrk, the victim and the server share the machine's cores, and other work on
the machine shows in every row: before the run ${busy ?? 'an unknown share'} of all cores was busy, and the load average was
${loadAverage} at its end.

Goal: the victim's p50 within ${GOAL.p50Factor}× unloaded, its p99 under ${GOAL.p99Ms} ms, the server's RSS within +${GOAL.rssMiB} MiB of
the unloaded run. "Answered" is the attack's rate and what one of its requests gets (status, code, size).

| pattern (sender) | attack answered | victim p50 ms | p99 ms | max ms | server RSS MiB (peak) | goal |
|---|---|---:|---:|---:|---:|---|
${lines.join('\n')}
`
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const wrk = Bun.which('wrk')
  if (!wrk) {
    console.error(wrkMissing('npm run bench -- abuse'))
    return 1
  }
  const started = new Date()
  const busy = await busyBeforeStart()
  const work = await mkdtemp(join(tmpdir(), 'keyward-abuse-'))
  workDir = work
  const limited = MEMORY_LIMIT_MIB === 0 ? null : await memoryCgroup(MEMORY_LIMIT_MIB * 2 ** 20)
  cgroup = limited && 'prefix' in limited ? limited : null
  const memoryNote = cgroup
    ? `in a cgroup limited to ${MEMORY_LIMIT_MIB.toLocaleString('en')} MiB of memory (as a container so limited runs it)`
    : `with no memory limit (${limited && 'unavailable' in limited ? limited.unavailable : 'as asked'}; the engine sees the machine's ${mib(totalmem())} MiB)`
  if (limited && 'unavailable' in limited) console.error(`no memory limit: ${limited.unavailable}`)
  try {
    console.error('building the data dir through the storage interface...')
    const w = await buildWorld(work)
    const wanted = values.only?.split('|')
    const all = patterns(w).filter((pattern) => wanted === undefined || wanted.some((text) => pattern.name.includes(text)))
    const answers = new Map<Pattern, string>()
    const reports: string[] = []
    for (let round = 1; round <= ROUNDS; round++) {
      const rows: Row[] = []
      // A fresh server for each row: the peak RSS of one pattern must not carry the heap that an
      // earlier one grew (the garbage collector gives memory back to the system slowly, if at all).
      for (const pattern of [null, ...all]) {
        console.error(`measuring${ROUNDS > 1 ? ` (round ${round} of ${ROUNDS})` : ''}: ${pattern ? pattern.name : 'unloaded'}...`)
        const server = await startKeyward(children, { store: 'embedded', dir: w.dir }, { name: 'keyward', prefix: cgroup?.prefix })
        const base = `http://127.0.0.1:${server.port}`
        if (pattern) answers.set(pattern, await probe(base, pattern))
        // Warm the victim's path (and the token cache) before measuring.
        await victim(`${base}/api/enrollments/${w.victimEnrollment}`, w.victimToken, 2)
        await waitQuiet([server.proc.pid], { timeoutMs: 30_000 })
        rows.push(await measure(wrk, base, server.proc.pid, w, pattern))
        await children.stop(server.proc, { graceMs: 30_000 })
        const last = rows.at(-1)!
        const growth = last === rows[0] ? '' : ` (${last.rss >= rows[0]!.rss ? '+' : ''}${mib(last.rss - rows[0]!.rss)})`
        const rate = last.attack ? `; attack ${Math.round(last.attack.rps).toLocaleString('en')}/s` : ''
        console.error(`  victim p50 ${last.victim.p50.toFixed(2)} ms, p99 ${last.victim.p99.toFixed(2)} ms; RSS ${mib(last.rss)} MiB${growth}${rate}`)
      }
      reports.push(report(w, rows, answers, started, busy, (await benchServeOptions()).note, memoryNote))
    }
    const text = reports.join('\n')
    console.log(text)
    // A partial or repeated run, or one without the limit asked for, is printed, never written over the full report.
    if (values.only === undefined && ROUNDS === 1 && (MEMORY_LIMIT_MIB === 0 || cgroup)) {
      await writeFile(REPORT, text)
      console.error(`written to ${REPORT}`)
    }
    return 0
  } finally {
    await children.stopAll({ signal: 'SIGTERM', graceMs: 30_000 })
    await cgroup?.remove()
    await rm(work, { recursive: true, force: true })
  }
}

onInterrupt(async () => {
  await children.stopAll({ signal: 'SIGKILL' })
  await cgroup?.remove()
  if (workDir) await rm(workDir, { recursive: true, force: true })
})

process.exitCode = await main()
