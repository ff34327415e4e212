-- The migration runner's bookkeeping (platform/migrations.py): one file of the platform package's named
-- statements (platform/catalogue.py).

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
-- Recorded definitions (the functions/ sections), keyed by the name of the object each creates.
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
