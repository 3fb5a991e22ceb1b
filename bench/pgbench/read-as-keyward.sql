-- pgbench script of bench/run.ts: the statements keyward sends for GET /api/enrollments/{id} with a
-- customer's token (traced with log_statement = all): the token with its organization and that
-- one's parent (Reader.findCredential), then the enrollment with its application
-- (Reader.findWithParent). pgbench sends them as keyward does, one round trip each outside a
-- transaction, so this is the database's limit for keyward's read; keyward's own time is the rest.
-- Update it when keyward's statements change.
SELECT to_jsonb(t) AS token, to_jsonb(o) AS organization, to_jsonb(p) AS parent FROM tokens t LEFT JOIN organizations o ON o.organization_id = t.organization_id LEFT JOIN organizations p ON p.organization_id = o.parent_id WHERE t.token_id = :token;
SELECT c.*, to_jsonb(p) AS parent_row FROM enrollments c LEFT JOIN applications p ON p.application_id = c.application_id WHERE c.enrollment_id = :id;
