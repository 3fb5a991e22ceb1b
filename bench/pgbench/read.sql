-- pgbench script of bench/run.ts: the database's own limit for a read by id, one select by primary key.
SELECT * FROM enrollments WHERE enrollment_id = :id;
