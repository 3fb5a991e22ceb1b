-- wrk script for bench/tools/abuse.ts: one abusive request pattern, described by environment variables.
--
--   ABUSE_PATHS  request paths, separated by "|", sent in turn (default "/")
--   ABUSE_TOKEN  a bearer token sent with every request (unset or empty: none)
--   ABUSE_JUNK   a number of characters: every request carries its own junk bearer token of that length
--   ABUSE_BODY   a number of bytes: every request is a POST of that many "[" as application/json
--
-- Ends with the `wrk-stats:` line of bench/wrk-stats.lua (exact counts, p99.9, max).
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

-- The `wrk-stats:` summary line (bench/wrk-stats.lua, beside this script).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "wrk-stats.lua")
