-- The group roles' privileges on every table and sequence, granted by their owner: the migrating
-- identity, which created them (a later migration can alter only what its own role owns). Its
-- default privileges cover every table a later migration creates, with no re-grant. Idempotent.
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO verification_app;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO verification_app;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO verification_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO verification_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO verification_app;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO verification_reader;
