-- The outbox's suppression of undelivered intents and its one writer of webhook events: one file of the
-- outbox package's functions and views (platform/catalogue.py; applied by platform/migrations.py in
-- file-name order).

-- name: suppress_undelivered_intents
-- transition: ready, retryable, claimed, attempting, ambiguous -> suppressed
-- why: its verification ended: nothing left to send (unfenced)
-- suppress: an intent that has not started a send (ready, retryable, claimed, ambiguous, or attempting
-- with sending_at NULL: the fused claim began its attempt, outbox/queries/claim.sql:start has not handed it
-- to a provider) becomes `suppressed` with a reason. Used by create (supersede), the worker (dead link
-- found at claim), confirm (a proof ends the remaining steps) and the reconciler (expired, superseded
-- or verified verifications). It is the one write that needs no lease: a dead verification is a fact
-- whoever holds the row. A batch claimed ahead may wait behind slow sends; a proof meanwhile
-- suppresses its step here, the start's fence then finds it gone (a stale write), and it is never
-- sent. The attempt such a claim began ends with a 'released' row, as outbox/queries/settle.sql:release
-- ends one. A row whose send started is left to settle. Row locks order it against start: whichever
-- commits first, the other's WHERE sees it. The rows are locked first (FOR UPDATE) and the attempt
-- log is written from the locked versions: a claim that commits while this waits for its lock has
-- turned a ready row into one 'attempting' with its attempt begun, and that attempt must end with
-- its 'released' row. (The statement's snapshot still shows the row as it was before the claim.)
-- Webhook events (role 'event') are never suppressed: a verified, expired or locked
-- verification is exactly what they report, so they must still be delivered.
-- plpgsql, not sql: its body is checked when it runs, not when it is created, so this file still applies
-- to a schema from before intents had a role, as the upgrade tests build it.
CREATE OR REPLACE FUNCTION suppress_undelivered_intents(p_verification_ids uuid[], p_reason text)
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH locked AS (
        SELECT id, status, lease_owner, lease_version, last_claimed_at
          FROM delivery_intents
         WHERE verification_id = ANY (p_verification_ids)
           AND (status IN ('ready', 'retryable', 'claimed', 'ambiguous') OR (status = 'attempting' AND sending_at IS NULL))
           AND role <> 'event'
           FOR UPDATE
    ), suppressed AS (
        UPDATE delivery_intents AS i
           SET status = 'suppressed', suppression_reason = p_reason, lease_owner = NULL, lease_until = NULL,
               completed_at = now(), updated_at = now()
          FROM locked AS l
         WHERE i.id = l.id
        RETURNING i.id, i.attempts, i.channel, i.template_version, l.lease_owner, l.lease_version,
                  l.last_claimed_at, l.status = 'attempting' AS begun
    ), logged AS (
        INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                       lease_version, outcome, error_class, error_detail, claimed_at)
        SELECT s.id || ':' || s.attempts, s.id, s.attempts, s.channel, s.template_version, s.lease_owner,
               s.lease_version, 'released', 'released', left('claimed ahead; ' || p_reason || ' before its send started', 500),
               s.last_claimed_at
          FROM suppressed AS s
         WHERE s.begun
    )
    SELECT s.id FROM suppressed AS s;
END $$;

-- name: event_data
-- event_data: a webhook event's `data`, from the verification row as the state change left it
-- (record_event adds the type's extras). The receiver's
-- contract (docs/webhooks.md, docs/openapi.yaml's webhooks): keys may be added, never removed or
-- renamed; never a token, a code or the destination. `channel` is the primary channel requested;
-- `verified_channel` / `verified_via` say which secret proved it (NULL until verified).
CREATE OR REPLACE FUNCTION event_data(p_verification verifications) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'verification_id', p_verification.id,
        'account_id', p_verification.account_id,
        'channel', p_verification.channel,
        'purpose', p_verification.purpose,
        'status', p_verification.status,
        'created_at', rfc3339(p_verification.created_at),
        'expires_at', rfc3339(p_verification.expires_at),
        'verified_at', rfc3339(p_verification.verified_at),
        'verified_channel', p_verification.verified_channel,
        'verified_via', p_verification.verified_via)
$$;

-- name: record_event
-- transition: (new) -> ready
-- why: a webhook event, recorded by the state change it reports
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
