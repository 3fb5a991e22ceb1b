-- wrk script for bench/run.ts, read runs: the request is the command line's (URL and -H headers),
-- with the bearer token of KEYWARD_TOKEN if it is set (so that it is not on a command line for
-- every process list to show); this adds a machine-readable summary line, with p99.9 and max
-- latency, at the end. No response() on purpose: it would make wrk parse every answer and slow the
-- load generator. wrk counts answers with status >= 400 itself (summary.errors.status).

function init(args)
  local token = os.getenv("KEYWARD_TOKEN")
  if token and #token > 0 then wrk.headers["Authorization"] = "Bearer " .. token end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "wrk-stats: requests=%d duration_us=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
    "mean_us=%.1f p50_us=%d p99_us=%d p999_us=%d max_us=%d\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
