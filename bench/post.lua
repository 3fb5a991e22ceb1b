-- wrk script for bench/http.ts: durable POST /api/organizations (creates a customer per request).
-- The vendor id and token come from the environment, set by bench/http.ts.
local vendor = os.getenv("KEYWARD_VENDOR_ID")
local token = os.getenv("KEYWARD_TOKEN")
if not vendor or not token then error("set KEYWARD_VENDOR_ID and KEYWARD_TOKEN") end

wrk.method = "POST"
wrk.body = '{"description":"bench","parent_id":"' .. vendor .. '"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token
