-- pgbench script of bench/run.ts: the statements keyward sends for POST /api/organizations by the
-- vendor's admin (traced with log_statement = all), in the same round trips: BEGIN sent with the
-- insert (the parent, the vendor itself, is not read: docs/storage.md, "Transactions"); its audit
-- event sent with the COMMIT (docs/storage.md, "Round trips"). Four statements in two round trips
-- where the limit (insert.sql) has one. The token's credential is remembered between requests
-- (docs/storage.md, "Credentials"), as for the read.
-- Update it when keyward's statements change.
\startpipeline
BEGIN;
INSERT INTO organizations (organization_id, parent_id, organization_type, description, state, environments, created, modified)
VALUES (gen_random_uuid(), :parent, 'customer', 'pgbench customer', 'active', NULL, (extract(epoch FROM now()) * 1000000)::bigint, (extract(epoch FROM now()) * 1000000)::bigint) RETURNING *;
\endpipeline
\startpipeline
INSERT INTO audit_events (event_id, action, target_type, target_id, actor_organization_id, actor_token_id, actor_role, actor_cli, customer_id, changes, trace_id, created, modified)
VALUES (gen_random_uuid(), 'organization.create', 'organization', gen_random_uuid(), :parent, :token, 'admin', NULL, NULL, '{"description":[null,"pgbench customer"],"state":[null,"active"]}', 'pgbench', (extract(epoch FROM now()) * 1000000)::bigint, (extract(epoch FROM now()) * 1000000)::bigint);
COMMIT;
\endpipeline
