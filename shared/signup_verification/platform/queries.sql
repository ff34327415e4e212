-- The platform's named statements (platform/catalogue.py): the migration runner's bookkeeping
-- (migrations.py), the database roles (grants.py), and the ledger of signed requests accepted once
-- (signature_replay: the HTTP edge remembers each one, api/auth.py; the reconciler reaps them).

-- name: migrations_table
-- The runner's own bookkeeping: one row per applied migration (its file's checksum refuses later edits).
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     text PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
)

-- name: migrations_tables
-- Which bookkeeping tables exist: `--list` reads a database without creating anything, and
-- schema_definitions arrives with migration 004.
SELECT to_regclass('schema_migrations') IS NOT NULL AS migrations, to_regclass('schema_definitions') IS NOT NULL AS definitions

-- name: migrations_applied
-- Applied migrations, for the runner and `verifyctl migrate --list` (NULL table: nothing applied yet).
SELECT version, name, checksum, applied_at FROM schema_migrations

-- name: migrations_restamp
-- An applied migration whose comments were rewritten once (sql/earlier_checksums.txt): the database
-- records the file's current checksum.
UPDATE schema_migrations SET checksum = :checksum WHERE version = :version

-- name: migrations_record
INSERT INTO schema_migrations (version, name, checksum) VALUES (:version, :name, :checksum)

-- name: migrations_definitions
-- Recorded definitions (the functions.sql sections), keyed by the name of the object each creates.
SELECT name, checksum, applied_at FROM schema_definitions

-- name: migrations_record_definition
INSERT INTO schema_definitions (name, checksum) VALUES (:name, :checksum)
ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()

-- name: migrations_forget_definition
DELETE FROM schema_definitions WHERE name = :name

-- name: migrations_objects
-- The functions and views of one name in the schema being migrated (an extension's own aside), as
-- DROP takes them: what a retired definition leaves behind.
SELECT 'FUNCTION ' || p.oid::regprocedure::text AS object
  FROM pg_proc AS p
 WHERE p.proname = :name AND p.pronamespace = current_schema()::regnamespace
   AND NOT EXISTS (SELECT 1 FROM pg_depend AS d
                    WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
UNION ALL
SELECT 'VIEW ' || c.oid::regclass::text
  FROM pg_class AS c
 WHERE c.relname = :name AND c.relkind = 'v' AND c.relnamespace = current_schema()::regnamespace

-- name: migrations_object_counts
-- How many functions and views each definition name has in the schema being migrated: exactly one.
SELECT d.name,
       (SELECT count(*) FROM pg_proc AS p
         WHERE p.proname = d.name AND p.pronamespace = current_schema()::regnamespace)
       + (SELECT count(*) FROM pg_class AS c
           WHERE c.relname = d.name AND c.relkind = 'v' AND c.relnamespace = current_schema()::regnamespace) AS objects
  FROM unnest(CAST(:names AS text[])) AS d (name)

-- name: migrations_session
-- The migration session's own limits (MIGRATION_STATEMENT_TIMEOUT_MS, MIGRATION_LOCK_TIMEOUT_MS), set for
-- the session (not the transaction); returns the values they replaced so the caller can restore them.
SELECT current_setting('statement_timeout') AS statement_timeout, current_setting('lock_timeout') AS lock_timeout,
       set_config('statement_timeout', CAST(:statement_timeout AS text), false) AS new_statement_timeout,
       set_config('lock_timeout', CAST(:lock_timeout AS text), false) AS new_lock_timeout

-- name: migrations_lock
-- One migration run at a time per database (two deploys, two test workers): a session-level
-- advisory lock, held across the run's transactions. Waits under the session's statement_timeout.
SELECT pg_advisory_lock(:key)

-- name: migrations_unlock
SELECT pg_advisory_unlock(:key)

-- name: grants_admin
-- The role to manage roles as, when the session's own role may not: on Cloud SQL the migrator is a
-- member of cloudsqlsuperuser (CREATEROLE), and PostgreSQL never passes a role attribute through
-- membership, so creating a role needs SET ROLE cloudsqlsuperuser. NULL where the session may itself
-- (a superuser: the embedded server) or where there is no such role to take.
SELECT CASE
           WHEN r.rolsuper OR r.rolcreaterole THEN NULL
           WHEN NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'cloudsqlsuperuser') THEN NULL
           WHEN pg_has_role('cloudsqlsuperuser', 'MEMBER') THEN 'cloudsqlsuperuser'
       END AS admin
  FROM pg_roles AS r
 WHERE r.rolname = current_user

-- name: grants_set_role
-- Act as the role that manages roles until RESET ROLE or the end of the transaction. The name
-- comes from platform/queries.sql:grants_admin, through grants.quote_identifier (role names cannot be parameters).
SET LOCAL ROLE {role}

-- name: grants_roles
-- The three NOLOGIN group roles (grants.ROLES) and their use of the schema, created by the role that
-- may manage roles (platform/queries.sql:grants_admin: cloudsqlsuperuser on Cloud SQL, which then holds ADMIN OPTION
-- on them and owns the schema). Idempotent: deploy.sh runs it on every deploy.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'verification_app') THEN
        CREATE ROLE verification_app NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'verification_reader') THEN
        CREATE ROLE verification_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'verification_operator') THEN
        CREATE ROLE verification_operator NOLOGIN;
    END IF;
END $$;
-- Operators act with the functions' own statements (verifyctl channel resume, sms resume, dispatch, ...).
GRANT verification_app TO verification_operator;
GRANT USAGE ON SCHEMA public TO verification_app, verification_reader;

-- name: grants_reset_role
-- Back to the session's own role: the owner of the tables grants on them (platform/queries.sql:grants_privileges).
RESET ROLE

-- name: grants_privileges
-- The group roles' privileges on every table and sequence, granted by their owner: the migrating
-- identity, which created them (a later migration can alter only what its own role owns). Its
-- default privileges cover every table a later migration creates, with no re-grant. Idempotent.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO verification_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO verification_app;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO verification_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO verification_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO verification_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO verification_reader;

-- name: grants_missing_users
-- The requested database users that do not exist (terraform creates the IAM users).
SELECT u.name FROM unnest(CAST(:users AS text[])) WITH ORDINALITY AS u (name, n)
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = u.name) ORDER BY u.n

-- name: grants_member
-- Membership of one IAM database user in one group role. Role names cannot be bind parameters:
-- grants.py fills both from quote_identifier (a validated name, double-quoted).
GRANT {role} TO {member}

-- name: remember_signature
-- Remember a signed request (request_signatures.replay_digest: the SHA-256 naming the request,
-- never a MAC); no row back means it was presented before (a replay).
INSERT INTO signature_replay (digest, expires_at)
VALUES (:digest, to_timestamp(:expires_at))
    ON CONFLICT (digest) DO NOTHING
RETURNING 1

-- name: reap_signatures
-- Accepted request signatures past their tolerance window (signature_replay), in a bounded batch.
WITH due AS (
    SELECT digest FROM signature_replay
     WHERE expires_at <= now()
     ORDER BY expires_at
     LIMIT :limit
)
DELETE FROM signature_replay AS s
 USING due
 WHERE s.digest = due.digest
RETURNING s.digest
