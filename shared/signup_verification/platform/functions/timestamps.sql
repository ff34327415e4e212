-- The platform's timestamps: one file of the platform package's functions and views
-- (platform/catalogue.py; applied by platform/migrations.py in file-name order).

-- name: rfc3339
-- rfc3339: the one timestamp format of every answer, event and operator output: RFC 3339, UTC, `Z`,
-- millisecond precision ('2026-12-01T21:23:32.123Z', what JavaScript's Date.toISOString() gives;
-- platform/timestamps.py writes the same in Python). NULL stays NULL. A single expression, declared
-- STABLE as to_char is: the planner inlines it where it is called. (Declared IMMUTABLE, it would not
-- be: each call would run through the SQL-function executor, ~90 µs, twice per create.)
CREATE OR REPLACE FUNCTION rfc3339(p_at timestamptz) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;
