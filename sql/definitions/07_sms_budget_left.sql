-- sms_budget_left: SMS sends the global budget still allows this UTC hour (NULL: no budget).
-- Spent = attempts begun this hour (each costs a message, ambiguous retries included), less those of
-- them that ended without reaching the provider (released, or refused before processing: the
-- index of sql/023 lists which), plus SMS intents claimed and not yet begun (in flight in some
-- worker); an operator's grant adds to it.
-- The claim reads it (outbox/claim.sql), so past the budget SMS intents simply stay eligible:
-- not failed, not charged an attempt. Email is never limited by it.
CREATE OR REPLACE FUNCTION sms_budget_left(p_max integer)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_max IS NULL THEN NULL ELSE greatest(0,
        p_max
        + coalesce((SELECT extra FROM sms_budget_grants WHERE hour = date_trunc('hour', now(), 'UTC')), 0)
        - (SELECT count(*) FROM delivery_attempts
            WHERE channel = 'sms' AND outcome = 'attempting' AND observed_at >= date_trunc('hour', now(), 'UTC'))
        -- an unsent attempt gives back the place its begun row took, when that row is of this hour
        + (SELECT count(*) FROM delivery_attempts AS u
            JOIN delivery_attempts AS b ON b.intent_id = u.intent_id AND b.attempt_number = u.attempt_number
                                       AND b.outcome = 'attempting'
                                       AND b.observed_at >= date_trunc('hour', now(), 'UTC')
            WHERE u.channel = 'sms' AND u.observed_at >= date_trunc('hour', now(), 'UTC')
              AND (u.outcome = 'released'
                   OR (u.outcome = 'retryable' AND u.error_class IN ('not_sent', 'channel_stopped', 'rate_limited'))))
        - (SELECT count(*) FROM delivery_intents WHERE channel = 'sms' AND status = 'claimed'))::integer END
$$;
