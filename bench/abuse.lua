-- wrk script for bench/abuse.ts: one abusive request pattern, described by environment variables.
--
--   ABUSE_PATHS  request paths, separated by "|", sent in turn (default "/")
--   ABUSE_TOKEN  a bearer token sent with every request (unset or empty: none)
--   ABUSE_JUNK   a number of characters: every request carries its own junk bearer token of that length
--   ABUSE_BODY   a number of bytes: every request is a POST of that many "[" as application/json
--
-- Ends with the `wrk-stats:` line of bench/run-get.lua (exact counts, p99.9, max).
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

function init(args)
  paths = {}
  for path in string.gmatch(os.getenv("ABUSE_PATHS") or "/", "[^|]+") do table.insert(paths, path) end
  local token = os.getenv("ABUSE_TOKEN")
  if token and #token > 0 then wrk.headers["Authorization"] = "Bearer " .. token end
  junk = tonumber(os.getenv("ABUSE_JUNK") or "")
  -- Unique per request: a fixed filler, then the thread and a per-thread counter (24 characters).
  if junk then filler = string.rep("J", junk - 24) end
  local size = tonumber(os.getenv("ABUSE_BODY") or "")
  if size then
    wrk.method = "POST"
    wrk.body = string.rep("[", size)
    wrk.headers["Content-Type"] = "application/json"
  end
  counter = 0
end

function request()
  counter = counter + 1
  local path = paths[(counter - 1) % #paths + 1]
  if junk then
    wrk.headers["Authorization"] = "Bearer " .. filler .. string.format("%08d%016d", tid, counter)
  end
  return wrk.format(nil, path)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "wrk-stats: requests=%d duration_us=%d connect=%d read=%d write=%d status=%d timeout=%d " ..
    "mean_us=%.1f p50_us=%d p99_us=%d p999_us=%d max_us=%d\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
