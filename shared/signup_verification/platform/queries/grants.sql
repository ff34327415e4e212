-- The database roles (platform/grants.py): one file of the platform package's named statements
-- (platform/catalogue.py).

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
-- comes from platform/queries/grants.sql:grants_admin, through grants.quote_identifier (role names cannot be parameters).
SET LOCAL ROLE {role}

-- name: grants_roles
-- The three NOLOGIN group roles (grants.ROLES) and their use of the schema, created by the role that
-- may manage roles (platform/queries/grants.sql:grants_admin: cloudsqlsuperuser on Cloud SQL, which then holds ADMIN OPTION
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
-- Back to the session's own role: the owner of the tables grants on them (platform/queries/grants.sql:grants_privileges).
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
