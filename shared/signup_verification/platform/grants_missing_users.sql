-- The requested database users that do not exist (terraform creates the IAM users).
SELECT u.name FROM unnest(CAST(:users AS text[])) WITH ORDINALITY AS u (name, n)
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = u.name) ORDER BY u.n
