-- The two NOLOGIN group roles (grants.APP_ROLE, grants.READER_ROLE) with privileges on every current table
-- and sequence, and on future ones. Idempotent: deploy.sh runs it on every deploy.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'verification_app') THEN
        CREATE ROLE verification_app NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'verification_reader') THEN
        CREATE ROLE verification_reader NOLOGIN;
    END IF;
END $$;
GRANT USAGE ON SCHEMA public TO verification_app, verification_reader;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO verification_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO verification_app;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO verification_reader;
-- Tables a later migration creates (as this same identity) are covered without a re-run.
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO verification_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO verification_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO verification_reader;
