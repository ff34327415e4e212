-- The three NOLOGIN group roles (grants.ROLES) and their use of the schema, created by the role that
-- may manage roles (grants_admin.sql: cloudsqlsuperuser on Cloud SQL, which then holds ADMIN OPTION
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
