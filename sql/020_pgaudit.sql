-- pgAudit: on Cloud SQL the instance loads the library (flag cloudsql.enable_pgaudit, infra/database.tf)
-- and pgaudit.log chooses what is audited ("ddl,role": schema changes and role or privilege
-- changes, never the statements that carry destinations). The extension itself must exist in the
-- database for those records to name the objects they touch, so this migration creates it.
--
-- Guarded: only where the server has the library loaded (Cloud SQL with the flag on, or a
-- PostgreSQL with pgaudit in shared_preload_libraries). The embedded development and test server
-- has no pgaudit, and CREATE EXTENSION there would fail: it skips, and so does any server without it.
DO $$
BEGIN
    IF current_setting('cloudsql.enable_pgaudit', true) = 'on'
        OR EXISTS (
            SELECT 1
            FROM pg_settings
            WHERE name = 'shared_preload_libraries' AND setting ~ '(^|,)\s*pgaudit\s*(,|$)'
        )
    THEN
        CREATE EXTENSION IF NOT EXISTS pgaudit;
    END IF;
END
$$;
