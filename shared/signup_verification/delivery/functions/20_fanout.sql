-- The fan-out's slot reservation: one file of the delivery package's functions and views
-- (platform/catalogue.py; applied by platform/migrations.py in file-name order).

-- name: fanout_reserve
-- fanout_reserve: the scheduled dispatch invocation asks for p_wanted more parallel invocations of
-- p_deployment; at most p_max may be live at once (DISPATCH_MAX_PARALLEL, the queue's bound). Under a
-- transaction-scoped advisory lock on the deployment, so two scheduled invocations deciding at once
-- (the hand-over between the scheduler's two jobs) cannot both take the last slots. Live = `until`
-- still ahead; rows past it (a crashed invocation, a task never delivered) are deleted here.
-- Returns the slots reserved (each one task to enqueue; none when p_wanted is 0, which only counts)
-- and the invocations live after it.
CREATE OR REPLACE FUNCTION fanout_reserve(p_deployment text, p_started_by text, p_wanted integer, p_max integer,
                                          p_until interval)
RETURNS TABLE (slots text[], live integer)
LANGUAGE plpgsql AS $$
DECLARE
    running integer;
    granted integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('fanout:' || p_deployment, 0));
    DELETE FROM dispatch_invocations AS d WHERE d.deployment = p_deployment AND d.until <= now();
    SELECT count(*) INTO running FROM dispatch_invocations AS d WHERE d.deployment = p_deployment;
    granted := greatest(0, least(p_wanted, p_max - running));
    RETURN QUERY
    WITH reserved AS (
        INSERT INTO dispatch_invocations (slot, deployment, started_by, until)
        SELECT p_started_by || '/' || gen_random_uuid(), p_deployment, p_started_by, now() + p_until
          FROM generate_series(1, granted)
        RETURNING dispatch_invocations.slot
    )
    SELECT coalesce(array_agg(r.slot), '{}'), running + granted FROM reserved AS r;
END $$;
