#!/usr/bin/env bash
# Every endpoint once, as a vendor admin, from an empty server to a keyset. Needs curl, jq and node.
#   KEYWARD_URL=http://127.0.0.1:3000 KEYWARD_TOKEN=<the vendor admin token> bash docs/walkthrough.sh
# CI runs it against the built binary (.ci/run). The README shows this file; a test keeps them equal.
set -euo pipefail
B=${KEYWARD_URL:?the base URL}
T=${KEYWARD_TOKEN:?a vendor admin token}
uuid() { node -e 'console.log(crypto.randomUUID())'; }

# api STATUS METHOD PATH [BODY]: one call; prints the answer, and stops the script unless it is STATUS.
api() {
  local answer
  answer=$(curl -sS -X "$2" "$B$3" -H "authorization: Bearer $T" ${4:+-H 'content-type: application/json' -d "$4"} -w '\n%{http_code}')
  echo "$2 $3 -> ${answer##*$'\n'}" >&2
  [ "${answer##*$'\n'}" = "$1" ] || { echo "expected $1: ${answer%$'\n'*}" >&2; return 1; }
  echo "${answer%$'\n'*}"
}

# Organizations: the vendor is the first one; a customer with virtual environments, a partner of it.
VENDOR=$(api 200 GET /api/organizations | jq -r '.organizations[0].organization_id')
CUSTOMER=$(api 201 POST /api/organizations '{"description":"Acme","parent_id":"'"$VENDOR"'","supported_environments":{"default":"prod","supported":"prod,test"}}' | jq -r .organization.organization_id)
PARTNER=$(api 201 POST /api/organizations '{"description":"Acme reseller","parent_id":"'"$CUSTOMER"'"}' | jq -r .organization.organization_id)
api 200 GET /api/organizations/$CUSTOMER
api 200 PATCH /api/organizations/$CUSTOMER '{"description":"Acme Inc."}'
api 200 PATCH /api/organizations/$PARTNER/suspend
api 200 PATCH /api/organizations/$PARTNER/activate

# Organization environments: add one, change the default, remove the one added.
api 200 GET /api/organizations/$CUSTOMER/environments
api 200 PATCH /api/organizations/$CUSTOMER/environments '{"environment":"staging"}'
api 200 PATCH /api/organizations/$CUSTOMER/environments '{"default":"test"}'
api 200 DELETE /api/organizations/$CUSTOMER/environments '{"environment":"staging"}'

# Applications: the create answer carries host_url and api_key, shown this once.
APP=$(api 201 POST /api/applications '{"organization_id":"'"$CUSTOMER"'","description":"Banking app","allowed_environments":"prod"}' | jq -r .application.application_id)
api 200 GET /api/applications
api 200 GET /api/applications/$APP
api 200 PATCH /api/applications/$APP '{"description":"Banking app v2"}'
api 200 PATCH /api/applications/$APP/suspend
api 200 PATCH /api/applications/$APP/activate

# Application environments: from the customer's list.
api 200 POST /api/environments/$APP '{"environment":"test"}'
api 200 DELETE /api/environments/$APP '{"environment":"test"}'
api 200 GET /api/environments/$APP

# Consumers (a vendor token names the customer): 201 when created, 200 when it already exists.
CONSUMER=$(uuid)
api 201 POST /api/consumers '{"consumer_id":"'"$CONSUMER"'","organization_id":"'"$CUSTOMER"'"}'
api 200 POST /api/consumers '{"consumer_id":"'"$CONSUMER"'","organization_id":"'"$CUSTOMER"'"}'
api 200 GET "/api/consumers?consumer_ids=$CONSUMER&state=active&page=1&page_size=50&order=desc"
api 200 GET /api/consumers/$CONSUMER
api 200 PATCH /api/consumers/$CONSUMER/suspend
api 200 PATCH /api/consumers/$CONSUMER/activate

# Installations
INSTALLATION=$(uuid)
api 201 POST /api/installations '{"installation_id":"'"$INSTALLATION"'","description":"Pixel 9","organization_id":"'"$CUSTOMER"'"}'
api 200 GET "/api/installations?installation_description=Pixel&installation_desc_search_mode=startswith"
api 200 GET /api/installations/$INSTALLATION
api 200 PATCH /api/installations/$INSTALLATION '{"description":"Pixel 9 Pro"}'
api 200 PATCH /api/installations/$INSTALLATION/suspend
api 200 PATCH /api/installations/$INSTALLATION/verify

# Enrollments (a missing consumer or installation would be created) and keysets.
ENROLLMENT=$(uuid)
api 201 POST /api/enrollments '{"enrollment_id":"'"$ENROLLMENT"'","consumer_id":"'"$CONSUMER"'","installation_id":"'"$INSTALLATION"'","application_id":"'"$APP"'","environment":"prod","installation_description":"Pixel 9"}'
api 200 GET "/api/enrollments?application_ids=$APP&page=1&page_size=100"
api 200 GET /api/enrollments/$ENROLLMENT
api 200 PATCH /api/enrollments/$ENROLLMENT/suspend
api 200 PATCH /api/enrollments/$ENROLLMENT/activate
KEY=$(node -e 'const { publicKey } = crypto.generateKeyPairSync("ec", { namedCurve: "P-256" }); console.log(publicKey.export({ type: "spki", format: "der" }).toString("base64"))')
api 201 POST /api/enrollments/$ENROLLMENT/keysets '{"client_enclave_key":"'"$KEY"'"}'
api 200 GET /api/enrollments/$ENROLLMENT/keysets

# Tokens: one for the customer, its secret shown this once; listed, read, revoked (401 from then on).
TOKEN_ID=$(api 201 POST /api/tokens '{"organization_id":"'"$CUSTOMER"'","role":"viewer","ttl":"30d","description":"reporting"}' | jq -r .token.token_id)
api 200 GET "/api/tokens?organization_ids=$CUSTOMER&state=active&page=1&page_size=50"
api 200 GET /api/tokens/$TOKEN_ID
api 200 PATCH /api/tokens/$TOKEN_ID/revoke

# The audit trail: every change above is an event; the enrollment's, newest first.
api 200 GET "/api/audit-events?target_ids=$ENROLLMENT&order=desc"

# Errors are RFC 9457 problem bodies with a stable code.
api 404 GET /api/consumers/$(uuid)

# The service: no token needed, but for the metrics (a vendor token's).
curl -sS -f $B/healthz && echo
curl -sS -f $B/readyz && echo
api 200 GET /metrics | grep '^keyward_build_info'
curl -sS -f $B/openapi.json | jq -r '.info.title + " " + .info.version'
curl -sS -f -o /dev/null $B/docs && curl -sS -f -o /dev/null $B/docs/scalar.js && echo "the API reference page: $B/docs"
