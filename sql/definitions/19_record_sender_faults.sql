-- What a failure for good sets off beyond its delivery (outbox/failure_policy.py), called by the
-- statement that records the failure so both commit together.
--
-- record_sender_faults: p_faults channel-wide sender or account faults of one channel (credentials,
-- an unregistered sender, an exhausted quota) in this statement. They count in the channel's run:
-- a run is the faults since its window started (a window older than p_window starts afresh). Once
-- the run reaches p_hold_after, the channel is held for p_hold_for (claim.sql takes none of its
-- intents). Returns true when this call started a hold.
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
    INSERT INTO channel_holds AS h (channel, faults, window_started_at, last_fault_at, category, code, provider)
    VALUES (p_channel, p_faults, now(), now(), p_category, p_code, p_provider)
    ON CONFLICT (channel) DO UPDATE
       SET faults = CASE WHEN h.window_started_at > now() - p_window THEN h.faults + excluded.faults
                         ELSE excluded.faults END,
           window_started_at = CASE WHEN h.window_started_at > now() - p_window THEN h.window_started_at
                                    ELSE now() END,
           last_fault_at = now(), category = excluded.category, code = excluded.code, provider = excluded.provider;
    UPDATE channel_holds SET held_at = now(), held_until = now() + p_hold_for
     WHERE channel = p_channel AND faults >= p_hold_after AND (held_until IS NULL OR held_until <= now())
    RETURNING true INTO started;
    RETURN coalesce(started, false);
END $$;
