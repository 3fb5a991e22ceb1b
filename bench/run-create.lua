-- wrk script for bench/run.ts, create runs: one new record per request, fresh ids every time.
--
--   wrk ... -s bench/run-create.lua URL -- keyward <file of application ids> <nonce> <environment>
--   wrk ... -s bench/run-create.lua URL -- json-server <file of application ids> <nonce> <environment>
--   wrk ... -s bench/run-create.lua URL -- organization <parent organization id>
--
-- keyward: POST /api/enrollments {enrollment_id, consumer_id, installation_id, application_id,
--   environment, installation_description}, cycling over the applications (the consumer and
--   installation are new too, so the server creates all three in one transaction).
-- json-server: POST /enrollments, the same body plus "id" (json-server's key) = enrollment_id.
-- organization: POST /api/organizations {description, parent_id}: one new customer (one row).
-- keyward's token comes from KEYWARD_TOKEN. Enrollment ids are unique by construction: a per-run
-- nonce, the wrk thread, the kind of id and a per-thread counter; the rest is random. Every answer
-- should be 201; wrk counts those >= 400 (errors.status).
local threads = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

function init(args)
  kind = args[1]
  counter = 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if kind ~= "json-server" then
    local token = os.getenv("KEYWARD_TOKEN")
    if not token then error("set KEYWARD_TOKEN") end
    wrk.headers["Authorization"] = "Bearer " .. token
  end
  if kind == "organization" then
    if not args[2] then error("organization: give the parent organization id") end
    wrk.body = '{"description":"wrk customer","parent_id":"' .. args[2] .. '"}'
    return
  end
  if kind ~= "keyward" and kind ~= "json-server" then error("first argument: keyward, json-server or organization") end
  local file = assert(io.open(args[2], "r"))
  apps = {}
  for line in file:lines() do
    if #line > 0 then table.insert(apps, line) end
  end
  file:close()
  if #apps == 0 then error("no application ids in " .. args[2]) end
  nonce = tonumber(args[3])
  environment = args[4]
  math.randomseed(nonce + tid * 7919)
end

local function uuid(kind_of_id)
  return string.format("%08x-%04x-4%03x-%04x-%012x", nonce, tid, kind_of_id, math.random(32768, 49151), counter)
end

function request()
  if kind == "organization" then return wrk.format() end
  counter = counter + 1
  local app = apps[(counter % #apps) + 1]
  local enrollment = uuid(1)
  local id = ""
  if kind == "json-server" then id = '"id":"' .. enrollment .. '",' end
  local body = '{' .. id .. '"enrollment_id":"' .. enrollment .. '","consumer_id":"' .. uuid(2) ..
    '","installation_id":"' .. uuid(3) .. '","application_id":"' .. app .. '","environment":"' .. environment ..
    '","installation_description":"wrk device"}'
  return wrk.format(nil, nil, nil, body)
end

-- The `wrk-stats:` summary line (bench/wrk-stats.lua, beside this script).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "") .. "wrk-stats.lua")
