-- What an account fault of our side sets off beyond its delivery (outbox/config.py FailurePolicy),
-- called by the statement that records the failure so both commit together. The fault's scope
-- (delivery/classification/) says which run it counts in: an account fault in its channel's, a route
-- fault in its route's (record_route_outcomes, sql/definitions/26); a message fault in neither.
--
-- record_sender_faults: p_faults account faults of one channel (credentials, a suspended account, an
-- exhausted quota, a sender that reaches no destination) in this statement. They count in the
-- channel's run (its channel_holds row with route ''): the faults since its window started (a window
-- older than p_window starts afresh). Once the run reaches p_hold_after, the whole channel is held for
-- p_hold_for (claim.sql takes none of its intents). Returns true when this call started a hold.
CREATE OR REPLACE FUNCTION record_sender_faults(p_channel text, p_faults integer, p_category text, p_code text,
                                                p_provider text, p_hold_after integer, p_window interval,
                                                p_hold_for interval) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    started boolean;
BEGIN
    IF p_faults IS NULL OR p_faults <= 0 OR p_channel IS NULL OR p_channel NOT IN ('email', 'sms') THEN
        RETURN false;
    END IF;
    INSERT INTO channel_holds AS h (channel, route, faults, window_started_at, last_fault_at, category, code, provider)
    VALUES (p_channel, '', p_faults, now(), now(), p_category, p_code, p_provider)
    ON CONFLICT (channel, route) DO UPDATE
       SET faults = CASE WHEN h.window_started_at > now() - p_window THEN h.faults + excluded.faults
                         ELSE excluded.faults END,
           window_started_at = CASE WHEN h.window_started_at > now() - p_window THEN h.window_started_at
                                    ELSE now() END,
           last_fault_at = now(), category = excluded.category, code = excluded.code, provider = excluded.provider;
    UPDATE channel_holds SET held_at = now(), held_until = now() + p_hold_for
     WHERE channel = p_channel AND route = '' AND faults >= p_hold_after
       AND (held_until IS NULL OR held_until <= now())
    RETURNING true INTO started;
    RETURN coalesce(started, false);
END $$;
