-- Which bookkeeping tables exist: `--list` reads a database without creating anything, and
-- schema_definitions arrives with migration 004.
SELECT to_regclass('schema_migrations') IS NOT NULL AS migrations, to_regclass('schema_definitions') IS NOT NULL AS definitions
