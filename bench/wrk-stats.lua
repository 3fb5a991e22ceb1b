-- The summary line every wrk script of bench/ ends its run with (loaded by each, read by
-- bench/support/wrk.ts): exact counts, and p99.9 and max latency, which wrk's own report rounds or
-- leaves out.

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "wrk-stats: requests=%d duration_us=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
    "mean_us=%.1f p50_us=%d p99_us=%d p999_us=%d max_us=%d\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
