-- Webhook events: the ONE function that writes an event intent. Every state change that has an
-- event calls it in its own statement (confirm_consume, confirm_wrong_code, the reconciler's expiry
-- sweep, delivery_failed, the reports' ingest), so the event commits with the change or not at
-- all; the outbox delivers it like any message (claim, lease, fence, attempt log, reconciler,
-- signals).
-- Webhooks are on exactly when the session says so: `signup_verification.webhooks = 'on'` is sent in
-- the connection's start-up packet when WEBHOOK_URL is set (platform/database.py session_settings),
-- so no statement costs an extra round trip and WEBHOOK_URL unset writes no event at all.
-- `signup_verification.webhook_events` (WEBHOOK_EVENTS: the types the site asked for, comma
-- separated; unset: the verification's own events and delivery.failed) and
-- `signup_verification.webhook_max_attempts` (WEBHOOK_MAX_ATTEMPTS) travel the same way.
-- p_verification: the row as the calling statement left it (its RETURNING: this function cannot
-- see the caller's own UPDATE). p_subject: the delivery (its channel) a per-delivery event reports
-- (delivery.delivered, delivery.bounced), or the channel a proof proved (verification.proved); NULL
-- for the verification's other events. One logical event
-- per type, verification and subject: a second call is a no-op (the unique index
-- delivery_intents_per_subject). Returns the rows written (0 or 1).
-- The data never holds a token, a code or the destination (the receiver is another system).
-- Changing the arguments needs `DROP FUNCTION IF EXISTS <old signature>;` first.
DROP FUNCTION IF EXISTS record_event(verifications, text, jsonb);
CREATE OR REPLACE FUNCTION record_event(p_verification verifications, p_event_type text,
                                        p_extra jsonb DEFAULT '{}'::jsonb, p_subject text DEFAULT NULL)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    written integer;
    wanted text := nullif(current_setting('signup_verification.webhook_events', true), '');
BEGIN
    IF p_verification.id IS NULL
       OR coalesce(current_setting('signup_verification.webhooks', true), '') <> 'on'
       OR NOT p_event_type = ANY (string_to_array(coalesce(wanted,
              'verification.verified,verification.proved,verification.expired,verification.locked,delivery.failed'), ',')) THEN
        RETURN 0;
    END IF;
    INSERT INTO delivery_intents (verification_id, channel, role, event_type, event_subject, payload, purpose,
                                  locale, template_version, max_attempts)
    VALUES (p_verification.id, 'webhook', 'event', p_event_type, p_subject, event_data(p_verification) || p_extra,
            p_verification.purpose, p_verification.locale, 'event/v1',
            coalesce(nullif(current_setting('signup_verification.webhook_max_attempts', true), '')::integer, 12))
    ON CONFLICT (verification_id, channel, event_type, event_subject) DO NOTHING;
    GET DIAGNOSTICS written = ROW_COUNT;
    RETURN written;
END $$;
