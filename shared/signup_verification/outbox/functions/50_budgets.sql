-- The SMS and voice budgets the claim reads: one file of the outbox package's functions and views
-- (platform/catalogue.py; applied by platform/migrations.py in file-name order).

-- name: sms_budget_left
-- sms_budget_left: text messages to phones (SMS and WhatsApp) the global budget (SMS_MAX_PER_HOUR)
-- still allows this UTC hour (NULL: no budget).
-- Spent = attempts begun this hour (each costs a message, ambiguous retries included), less those of
-- them that ended without reaching the provider (released, or refused before processing: the
-- index delivery_attempts_text_unsent lists which), plus intents claimed and not yet begun (in flight in some
-- worker); an operator's grant (`verifyctl sms resume`) adds to it.
-- WhatsApp counts here, not in a budget of its own: the budget caps what pumping numbers costs in an
-- hour, a WhatsApp code is a message charged per send to the same numbers, and one budget means a
-- script that switches channels gets no second allowance.
-- The claim reads it (outbox/queries/claim.sql:claim), so past the budget SMS and WhatsApp intents simply
-- stay eligible: not failed, not charged an attempt. Email and calls are never limited by it.
CREATE OR REPLACE FUNCTION sms_budget_left(p_max integer)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_max IS NULL THEN NULL ELSE greatest(0,
        p_max
        + coalesce((SELECT extra FROM sms_budget_grants WHERE hour = date_trunc('hour', now(), 'UTC')), 0)
        - (SELECT count(*) FROM delivery_attempts
            WHERE channel IN ('sms', 'whatsapp') AND outcome = 'attempting' AND observed_at >= date_trunc('hour', now(), 'UTC'))
        -- an unsent attempt gives back the place its begun row took, when that row is of this hour
        + (SELECT count(*) FROM delivery_attempts AS u
            JOIN delivery_attempts AS b ON b.intent_id = u.intent_id AND b.attempt_number = u.attempt_number
                                       AND b.outcome = 'attempting'
                                       AND b.observed_at >= date_trunc('hour', now(), 'UTC')
            WHERE u.channel IN ('sms', 'whatsapp') AND u.observed_at >= date_trunc('hour', now(), 'UTC')
              AND (u.outcome = 'released'
                   OR (u.outcome = 'retryable' AND u.error_class IN ('not_sent', 'channel_stopped', 'rate_limited'))))
        - (SELECT count(*) FROM delivery_intents WHERE channel IN ('sms', 'whatsapp') AND status = 'claimed'))::integer END
$$;

-- name: voice_budget_left
-- voice_budget_left: calls the call budget (VOICE_MAX_PER_HOUR) still allows this UTC hour (NULL: no
-- budget), counted as sms_budget_left counts messages (delivery_attempts_voice_begun and _unsent); an
-- operator's grant (`verifyctl voice resume`) adds to it. A call costs several SMS (per minute, and the
-- premium ranges calls reach cost more still), so calls have a budget of their own. The claim reads it:
-- past it voice intents stay eligible, unfailed and uncharged. Its counts are written out, not shared
-- with sms_budget_left through a function taking the channels: PostgreSQL never inlines a SQL function
-- whose body has subqueries, so such a body would be planned for any channel and miss the partial indexes.
CREATE OR REPLACE FUNCTION voice_budget_left(p_max integer)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_max IS NULL THEN NULL ELSE greatest(0,
        p_max
        + coalesce((SELECT extra FROM voice_budget_grants WHERE hour = date_trunc('hour', now(), 'UTC')), 0)
        - (SELECT count(*) FROM delivery_attempts
            WHERE channel = 'voice' AND outcome = 'attempting' AND observed_at >= date_trunc('hour', now(), 'UTC'))
        -- an unsent attempt gives back the place its begun row took, when that row is of this hour
        + (SELECT count(*) FROM delivery_attempts AS u
            JOIN delivery_attempts AS b ON b.intent_id = u.intent_id AND b.attempt_number = u.attempt_number
                                       AND b.outcome = 'attempting'
                                       AND b.observed_at >= date_trunc('hour', now(), 'UTC')
            WHERE u.channel = 'voice' AND u.observed_at >= date_trunc('hour', now(), 'UTC')
              AND (u.outcome = 'released'
                   OR (u.outcome = 'retryable' AND u.error_class IN ('not_sent', 'channel_stopped', 'rate_limited'))))
        - (SELECT count(*) FROM delivery_intents WHERE channel = 'voice' AND status = 'claimed'))::integer END
$$;
