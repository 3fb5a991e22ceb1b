-- wrk script for bench/run.ts, read runs: the request is the command line's (URL and -H headers),
-- with the bearer token of KEYWARD_TOKEN if it is set (so that it is not on a command line for
-- every process list to show); this adds a machine-readable summary line, with p99.9 and max
-- latency, at the end. No response() on purpose: it would make wrk parse every answer and slow the
-- load generator. wrk counts answers with status >= 400 itself (summary.errors.status).

function init(args)
  local token = os.getenv("KEYWARD_TOKEN")
  if token and #token > 0 then wrk.headers["Authorization"] = "Bearer " .. token end
end

-- The `wrk-stats:` summary line (bench/wrk-stats.lua, beside this script).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "wrk-stats.lua")
