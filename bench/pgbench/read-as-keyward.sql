-- pgbench script of bench/run.ts: the statement keyward sends for GET /api/enrollments/{id} with a
-- customer's token (traced with log_statement = all): the enrollment with its application
-- (Reader.findWithParent), if the customer owns it (the caller's scope, `within`). The token's credential is remembered between requests and confirmed by
-- a read of the credential generation that serves every request arriving while the previous one
-- runs (docs/storage.md, "Credentials"): under this load a few per millisecond, not one per request,
-- so it is left out. This is the database's limit for keyward's read; keyward's own time is the rest.
-- Update it when keyward's statements change.
SELECT t.*, to_jsonb(p) AS parent_row FROM enrollments t LEFT JOIN applications p ON p.application_id = t.application_id WHERE t.enrollment_id = :id AND t.organization_id = ANY(ARRAY[:owner]::uuid[]);
