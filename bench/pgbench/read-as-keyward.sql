-- pgbench script of bench/run.ts: the statements keyward sends for GET /api/enrollments/{id} with a
-- customer's token (traced with log_statement = all): the token's organization, the enrollment, its
-- application. pgbench sends them as keyward does, one round trip each outside a transaction, so
-- this is the database's limit for keyward's read; keyward's own time is the rest. Update it when
-- keyward's statements change.
SELECT * FROM organizations WHERE organization_id = :org;
SELECT * FROM enrollments WHERE enrollment_id = :id;
SELECT * FROM applications WHERE application_id = :app;
