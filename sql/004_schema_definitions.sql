-- Repeatable definitions (sql/definitions/NN_name.sql: functions and views, always the current text).
-- The migration runner re-applies a definition when its checksum differs from the one recorded here,
-- and re-applies all of them whenever a migration ran, in the same transaction as those migrations.
-- Key: the file's name without its order number, so renumbering a file does not re-create it.
CREATE TABLE schema_definitions (
    name        text PRIMARY KEY,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
