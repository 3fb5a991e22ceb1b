-- pgbench script of bench/run.ts: the statements keyward sends for POST /api/organizations by the
-- vendor's admin (traced with log_statement = all): the token's organization and the parent, read
-- outside the transaction; then the transaction: the parent locked FOR SHARE, the insert, the
-- commit. Six round trips where the limit (insert.sql) has one; every concurrent create locks the
-- same parent row. Update it when keyward's statements change.
SELECT * FROM organizations WHERE organization_id = :parent;
SELECT * FROM organizations WHERE organization_id = :parent;
BEGIN;
SELECT * FROM organizations WHERE organization_id = :parent FOR SHARE;
INSERT INTO organizations (organization_id, parent_id, organization_type, description, state, environments, created, modified)
VALUES (gen_random_uuid(), :parent, 'customer', 'pgbench customer', 'active', NULL, (extract(epoch FROM now()) * 1000000)::bigint, (extract(epoch FROM now()) * 1000000)::bigint) RETURNING *;
COMMIT;
