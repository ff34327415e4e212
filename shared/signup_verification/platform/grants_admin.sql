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
