-- pgbench script of bench/run.ts: the database's own limit for a durable create, one row in one
-- transaction, into a table shaped like keyward's organizations (bench_organizations, made LIKE
-- organizations INCLUDING ALL), with keyward's clock expression for created and modified.
INSERT INTO bench_organizations (organization_id, parent_id, organization_type, description, state, environments, created, modified)
VALUES (gen_random_uuid(), :parent, 'customer', 'pgbench customer', 'active', NULL, (extract(epoch FROM now()) * 1000000)::bigint, (extract(epoch FROM now()) * 1000000)::bigint);
