-- Abuse limits at create: a helper of create_limit_wait.
-- limit_wait: seconds until the p_limit-th newest event of a key leaves the window (0 = room left).
-- Reads at most p_limit rows of one (key, created_at) index range.
-- STABLE, not IMMUTABLE: it reads now(). Declared IMMUTABLE it could not be inlined, and plpgsql ran
-- it through the SQL-function executor, planning it on every call (~8 µs, three times per create).
CREATE OR REPLACE FUNCTION limit_wait(p_times timestamptz[], p_limit integer, p_window interval)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_limit IS NULL OR coalesce(array_length(p_times, 1), 0) < p_limit THEN 0
                ELSE greatest(1, ceil(extract(epoch FROM p_times[p_limit] + p_window - now())))::integer END
$$;

