-- wrk script for bench/scale.ts: POST /api/enrollments with a fresh enrollment, consumer and
-- installation per request (so every answer should be 201), cycling over existing applications.
--
--   wrk ... -s bench/scale-post.lua URL -- <file of application ids> <nonce> <environment>
--
-- The token comes from the environment (KEYWARD_TOKEN). Ids are unique by construction: a per-run
-- nonce, the wrk thread, the kind of id and a per-thread counter; the rest is random.
local token = os.getenv("KEYWARD_TOKEN")
if not token then error("set KEYWARD_TOKEN") end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token

local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

function init(args)
  local file = assert(io.open(args[1], "r"))
  apps = {}
  for line in file:lines() do
    if #line > 0 then table.insert(apps, line) end
  end
  file:close()
  if #apps == 0 then error("no application ids in " .. args[1]) end
  nonce = tonumber(args[2])
  environment = args[3]
  math.randomseed(nonce + tid * 7919)
  counter = 0
  created = 0
  other = 0
  first_other = 0
end

local function uuid(kind)
  return string.format("%08x-%04x-4%03x-%04x-%012x", nonce, tid, kind, math.random(32768, 49151), counter)
end

function request()
  counter = counter + 1
  local app = apps[(counter % #apps) + 1]
  local body = '{"enrollment_id":"' .. uuid(1) .. '","consumer_id":"' .. uuid(2) .. '","installation_id":"' .. uuid(3) ..
    '","application_id":"' .. app .. '","environment":"' .. environment .. '","installation_description":"wrk device"}'
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status == 201 then
    created = created + 1
  else
    other = other + 1
    if first_other == 0 then first_other = status end
  end
end

function done(summary, latency, requests)
  local c, o, f = 0, 0, 0
  for _, thread in ipairs(threads) do
    c = c + thread:get("created")
    o = o + thread:get("other")
    if f == 0 then f = thread:get("first_other") end
  end
  io.write(string.format("scale-post: created=%d other=%d first_other_status=%d\n", c, o, f))
end
