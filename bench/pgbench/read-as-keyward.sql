-- pgbench script of bench/run.ts: the statement keyward sends for GET /api/enrollments/{id} with a
-- customer's token (traced with log_statement = all): the enrollment with its application
-- (Reader.findWithParent). The token's credential is remembered between requests and confirmed by
-- a read of the credential generation that serves every request arriving while the previous one
-- runs (docs/storage.md, "Credentials"): under this load a few per millisecond, not one per request,
-- so it is left out. This is the database's limit for keyward's read; keyward's own time is the rest.
-- Update it when keyward's statements change.
SELECT c.*, to_jsonb(p) AS parent_row FROM enrollments c LEFT JOIN applications p ON p.application_id = c.application_id WHERE c.enrollment_id = :id;
