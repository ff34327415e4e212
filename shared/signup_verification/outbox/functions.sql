-- The outbox package's functions and views (platform/catalogue.py; applied by platform/migrations.py).

-- name: delivery_attempts_append_only
-- The database refuses UPDATE, DELETE and TRUNCATE of the attempt log, except inside the
-- retention purge, which sets `SET LOCAL signup_verification.retention_purge = 'on'`.
-- Its triggers (delivery_attempts_append_only, delivery_attempts_no_truncate) are in sql/schema.sql;
-- delivery_observations' use it too, hence the table's name in the message.
CREATE OR REPLACE FUNCTION delivery_attempts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('signup_verification.retention_purge', true), '') = 'on' THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    RAISE EXCEPTION '% is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;

-- name: no_orphans
-- no_orphans: what three dropped foreign keys guaranteed on delete, checked only when rows are deleted
-- (dropped: their insert-time RI checks were a large share of the hot path's CPU).
--   AFTER DELETE ON delivery_intents: no attempt row may still name a deleted intent. (The insert
--     side: every statement that appends an attempt row takes the intent from its own fenced
--     UPDATE ... RETURNING, outbox/*.sql, so the intent exists and is locked.)
--   AFTER DELETE ON verifications: no create_events row and no delivery intent may still name a deleted
--     verification. (The insert side: create_verification inserts both right after the verification;
--     record_event, the other writer of intents, writes for the row its caller's UPDATE just locked.)
-- The retention purge deletes those rows in the same statement (operations/queries.sql:purge).
-- Statement-level with the deleted rows as a transition table: one index probe per deleted row
-- (the LATERAL ... LIMIT 1 keeps it a probe: a transition table has no statistics, and a join
-- could be planned as a hash over a scan of the whole log).
CREATE OR REPLACE FUNCTION no_orphans() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- (nested IFs: each query is planned only for the table whose rows `gone` holds)
    IF TG_TABLE_NAME = 'delivery_intents' THEN
        IF EXISTS (SELECT 1 FROM gone AS g
                    CROSS JOIN LATERAL (SELECT 1 FROM delivery_attempts AS a WHERE a.intent_id = g.id LIMIT 1) AS found) THEN
            RAISE EXCEPTION 'deleting delivery intents would leave their attempt rows behind; delete those in the same statement'
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    ELSIF TG_TABLE_NAME = 'verifications' THEN
        IF EXISTS (SELECT 1 FROM gone AS g
                    CROSS JOIN LATERAL (SELECT 1 FROM create_events AS e WHERE e.verification_id = g.id LIMIT 1) AS found) THEN
            RAISE EXCEPTION 'deleting verifications would leave their create_events rows behind; delete those in the same statement'
                USING ERRCODE = 'foreign_key_violation';
        END IF;
        IF EXISTS (SELECT 1 FROM gone AS g
                    CROSS JOIN LATERAL (SELECT 1 FROM delivery_intents AS i WHERE i.verification_id = g.id LIMIT 1) AS found) THEN
            RAISE EXCEPTION 'deleting verifications would leave their delivery intents behind; delete those in the same statement'
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    END IF;
    RETURN NULL;
END $$;

-- name: eligible_delivery_intents
-- The one definition of "eligible for delivery". The worker's claim and the operator signals
-- both read this view, so the chart and the queue cannot disagree.
-- `SELECT *` is expanded when the view is (re)created: the runner re-applies every definition after
-- a migration, so a column a migration adds to delivery_intents reaches the view in that same run.
-- CREATE OR REPLACE VIEW may only append columns; a migration that drops or retypes one of
-- delivery_intents' columns must `DROP VIEW eligible_delivery_intents` first (this file recreates it).
CREATE OR REPLACE VIEW eligible_delivery_intents AS
    SELECT * FROM delivery_intents
    WHERE status IN ('ready', 'retryable') AND next_attempt_at <= now();

-- name: step_sends
-- The one definition of "this step's message may have reached the person": each message intent (a
-- verification's step) with `may_have_reached`, a send that began and was not proven never to have
-- reached the provider: in flight (its send started: sending_at, status attempting), taken by the
-- provider (accepted, a delivered or final report: delivered_at, undeliverable_reason), or an
-- ambiguous attempt the provider's lookup did not find absent (each lookup that found an ambiguous
-- attempt absent logs one `provider_lookup_absent` row). Every other attempt certainly reached no
-- one: released before its send started, settled `retryable`, refused for good at submission
-- (`failed` without a report), absent at the provider. `ended_unsent`: the intent is terminal and its
-- message never reached the provider (it failed before any send, or was suppressed or expired
-- unsent): it never will. The confirmations' state and the read API read both
-- (verifications/queries.sql:confirm_state, read). Only an intent with an ambiguous attempt reads the
-- attempt log, on its primary key by intent: the cost is the verification's few intents, whatever the
-- history.
CREATE OR REPLACE VIEW step_sends AS
    SELECT i.verification_id, i.channel, r.may_have_reached, i.completed_at IS NOT NULL AND NOT r.may_have_reached
           AS ended_unsent
      FROM delivery_intents AS i
     CROSS JOIN LATERAL (
         SELECT (i.status = 'attempting' AND i.sending_at IS NOT NULL)
                OR i.status = 'accepted' OR i.undeliverable_reason IS NOT NULL OR i.delivered_at IS NOT NULL
                OR (i.ambiguous_count > 0
                    AND i.ambiguous_count > (SELECT count(*) FROM delivery_attempts AS a
                                              WHERE a.intent_id = i.id AND a.error_class = 'provider_lookup_absent'))
                    AS may_have_reached) AS r
     WHERE i.event_type IS NULL;

-- name: suppress_undelivered_intents
-- transition: ready, retryable, claimed, attempting, ambiguous -> suppressed
-- why: its verification ended: nothing left to send (unfenced)
-- suppress: an intent that has not started a send (ready, retryable, claimed, ambiguous, or attempting
-- with sending_at NULL: the fused claim began its attempt, outbox/queries.sql:start has not handed it
-- to a provider) becomes `suppressed` with a reason. Used by create (supersede), the worker (dead link
-- found at claim), confirm (a proof ends the remaining steps) and the reconciler (expired, superseded
-- or verified verifications). It is the one write that needs no lease: a dead verification is a fact
-- whoever holds the row. A batch claimed ahead may wait behind slow sends; a proof meanwhile
-- suppresses its step here, the start's fence then finds it gone (a stale write), and it is never
-- sent. The attempt such a claim began ends with a 'released' row, as outbox/queries.sql:release
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

-- name: intent_step
-- intent_step: a message intent's step, its place among its verification's message intents (1: the
-- primary, 2: the fallback, 3: the step after it): create writes them in step order (enqueue_steps),
-- so the order of their ids is the steps'.
-- The events name a delivery by it, as the read API does (verifications/queries.sql:read).
CREATE OR REPLACE FUNCTION intent_step(p_verification_id uuid, p_intent_id bigint) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT count(*)::integer FROM delivery_intents
     WHERE verification_id = p_verification_id AND role <> 'event' AND id <= p_intent_id
$$;

-- name: step_deliveries
-- step_deliveries: every message delivery (each step) of the verifications the
-- failed intents belong to, as the site reads it: the failed ones with the reasons passed in, the
-- others as their rows are now (a suppressed one by why).
CREATE OR REPLACE FUNCTION step_deliveries(p_intent_ids bigint[], p_reasons jsonb)
RETURNS TABLE (verification_id uuid, intent_id bigint, step integer, channel text, role text, status text,
               failed_at text, reason jsonb, just_failed boolean)
LANGUAGE sql STABLE AS $$
    SELECT m.verification_id, m.id, intent_step(m.verification_id, m.id), m.channel, m.role,
           CASE WHEN m.id = ANY (p_intent_ids) THEN coalesce(r.status, 'failed')
                WHEN m.status = 'failed' AND m.undeliverable_reason IS NOT NULL THEN 'undeliverable'
                ELSE m.status END,
           CASE WHEN m.id = ANY (p_intent_ids) THEN rfc3339(now()) ELSE rfc3339(m.failed_at) END,
           CASE WHEN m.id = ANY (p_intent_ids)
                THEN jsonb_build_object('category', coalesce(r.category, 'unknown'), 'code', r.code,
                                        'provider', r.provider, 'fault', coalesce(r.fault, 'transient_or_unknown'))
                WHEN m.status = 'failed'
                THEN jsonb_build_object('category', coalesce(m.failure_category, 'unknown'), 'code', m.failure_code,
                                        'provider', m.failure_provider,
                                        'fault', coalesce(m.failure_fault, 'transient_or_unknown'))
                WHEN m.status = 'suppressed'
                THEN jsonb_build_object('category', CASE WHEN m.suppression_reason = 'expired' THEN 'expired'
                                                         ELSE 'suppressed' END,
                                        'code', m.suppression_reason, 'provider', NULL,
                                        'fault', 'transient_or_unknown') END,
           m.id = ANY (p_intent_ids)
      FROM delivery_intents AS m
      LEFT JOIN jsonb_to_recordset(coalesce(p_reasons, '[]'::jsonb))
                AS r(intent_id bigint, category text, code text, provider text, fault text, status text)
             ON r.intent_id = m.id
     WHERE m.role <> 'event'
       AND m.verification_id IN (SELECT i.verification_id FROM delivery_intents AS i WHERE i.id = ANY (p_intent_ids))
$$;

-- name: delivery_failed
-- delivery_failed: the one place that says what follows when message intents fail for good. Called
-- by the statement that failed them (outbox/queries.sql:settle, outbox/queries.sql:resolve_ambiguous,
-- outbox/queries.sql:resolve_lookup, the delivery reports' ingest_delivery_reports, and create when a
-- suppressed destination is answered silently), so its effects commit with the failure or not at all.
-- p_intent_ids: the intents this statement just made `failed` (NULL or empty: nothing to do).
-- p_reasons: a JSON array with one {intent_id, category, code, provider, fault, status} per failed
-- intent (status 'undeliverable' when it was accepted first; 'failed' otherwise). The calling
-- statement's own UPDATE may not be visible here yet: these ids are treated as failed whatever
-- their rows read, with these reasons, and only other rows are written (the verification's other
-- intents, new event intents).
-- Effects:
--   * the steps: the next waiting step is brought forward when the step before it failed;
--   * `delivery.bounced` (opt-in, WEBHOOK_EVENTS) for each failed delivery, with its reason;
--   * `delivery.failed` once no message channel of a pending verification is left, with every
--     delivery's reason.
-- Returns the number of rows those effects wrote. The deliveries as the site reads them:
-- step_deliveries.
CREATE OR REPLACE FUNCTION delivery_failed(p_intent_ids bigint[], p_reasons jsonb DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    written integer := 0;
    n integer;
BEGIN
    IF p_intent_ids IS NULL OR cardinality(p_intent_ids) = 0 THEN
        RETURN 0;
    END IF;
    -- Serialise on the verifications (in id order: no deadlock between two callers). Two channels of
    -- one verification failing in concurrent transactions (policy `both` under two dispatchers, a
    -- bounce ingested while the SMS settles) would otherwise each still see the other as in flight,
    -- and neither would record delivery.failed. The statements below take a fresh snapshot once the
    -- lock is held, so the second one sees the first one's commit.
    PERFORM 1 FROM verifications
      WHERE id IN (SELECT verification_id FROM delivery_intents WHERE id = ANY (p_intent_ids) AND role <> 'event')
      ORDER BY id FOR UPDATE;

    -- The steps: a step that failed for good makes its verification's next waiting step due now (its
    -- next_attempt_at, the outbox's own schedule: the next claim takes it), recording why. The next
    -- waiting step is the first later step (id order is step order) not yet due and never tried with
    -- only failed steps between the two: a chain, so when step 2 fails too, step 3 comes forward,
    -- and a step already due or sent is left. Reads only the failed rows' verification_id and id,
    -- which the caller's UPDATE never changes (the steps between are read as they are now, those
    -- failed here counted as failed).
    UPDATE delivery_intents AS f
       SET next_attempt_at = now(), brought_forward_at = now(), updated_at = now()
      FROM delivery_intents AS p
     WHERE p.id = ANY (p_intent_ids) AND p.role <> 'event'
       AND f.verification_id = p.verification_id AND f.role = 'fallback' AND f.id > p.id
       AND f.status = 'ready' AND f.attempts = 0 AND f.next_attempt_at > now()
       AND NOT EXISTS (SELECT 1 FROM delivery_intents AS b
                        WHERE b.verification_id = p.verification_id AND b.role <> 'event'
                          AND b.id > p.id AND b.id < f.id
                          AND b.status <> 'failed' AND NOT b.id = ANY (p_intent_ids));
    GET DIAGNOSTICS n = ROW_COUNT;
    written := written + n;

    -- `delivery.bounced`: one per failed delivery (its subject is the delivery's channel).
    written := written + coalesce((
        SELECT sum(record_event(v, 'delivery.bounced',
                   jsonb_build_object('delivery', jsonb_build_object('step', d.step, 'channel', d.channel, 'role', d.role,
                                      'status', d.status, 'failed_at', d.failed_at, 'reason', d.reason)),
                   d.channel))
          FROM step_deliveries(p_intent_ids, p_reasons) AS d
          JOIN verifications AS v ON v.id = d.verification_id
         WHERE d.just_failed), 0);

    -- `delivery.failed` for each pending verification one of whose message intents (primary or
    -- fallback; a failed webhook event is not a delivery) failed here and none of whose message
    -- intents is left: every other one is failed or suppressed too. Reads the other intents as
    -- they are now (a fallback just brought forward above is left, so no event yet).
    written := written + coalesce((
        SELECT sum(record_event(v, 'delivery.failed', jsonb_build_object(
                   'failed_channels', (SELECT jsonb_agg(DISTINCT d.channel) FROM jsonb_to_recordset(f.deliveries)
                                           AS d(channel text)),
                   'deliveries', f.deliveries)))
          FROM (SELECT d.verification_id,
                       jsonb_agg(jsonb_build_object('step', d.step, 'channel', d.channel, 'role', d.role, 'status', d.status,
                                                    'failed_at', d.failed_at, 'reason', d.reason)
                                 ORDER BY d.intent_id) AS deliveries,
                       bool_and(d.just_failed OR d.status IN ('failed', 'undeliverable', 'suppressed')) AS none_left,
                       bool_or(d.just_failed) AS any_failed
                  FROM step_deliveries(p_intent_ids, p_reasons) AS d
                 GROUP BY d.verification_id) AS f
          JOIN verifications AS v ON v.id = f.verification_id
         WHERE v.status = 'pending' AND f.none_left AND f.any_failed), 0);
    RETURN written;
END $$;

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
-- The claim reads it (outbox/queries.sql:claim), so past the budget SMS and WhatsApp intents simply
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

-- name: enqueue_steps
-- transition: (new) -> ready, failed
-- why: create: ready, or failed at once for a suppressed destination answered silently
-- enqueue_steps: a new verification's message intents, one per step, written by create_verification_v2
-- in its transaction (verifications/functions.sql), right after the verification (p_verification, as
-- its INSERT returned it), in step order (their ids are the steps' order: intent_step). The steps'
-- channels are the verification's (channel, fallback_channel, step3_channel); the arrays hold one
-- entry per step: a later step's own destination (step 1's is the verification's), the channel policy
-- and after_seconds each intent records (verifications' channel_policy: step 1 records step 2's), and
-- whether create found its destination suppressed. Step 1 (role 'primary') is eligible at once, every
-- later one (role 'fallback') at created_at + its after_seconds (the claim's eligibility view and the
-- signals ignore it until then), or earlier when the step before fails for good (delivery_failed).
-- A destination create found suppressed and answers silently is `failed` at once (category
-- `suppressed`, the recipient's fault), never eligible, and delivery_failed() sets off what follows
-- (the next step brought forward, the events).
CREATE OR REPLACE FUNCTION enqueue_steps(p_verification verifications, p_template_version text,
                                         p_max_attempts integer, p_destinations text[], p_policies text[],
                                         p_after_seconds integer[], p_suppressed boolean[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    channels text[] := ARRAY[p_verification.channel, p_verification.fallback_channel, p_verification.step3_channel];
    failed_ids bigint[] := '{}';
    failed_reasons jsonb;
    intent_id bigint;
    suppressed boolean;
BEGIN
    FOR step IN 1 .. cardinality(channels) LOOP
        EXIT WHEN channels[step] IS NULL;  -- the steps are contiguous: none after a missing one
        suppressed := coalesce(p_suppressed[step], false);
        INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, max_attempts,
                                      role, policy, after_seconds, destination, next_attempt_at, status,
                                      completed_at, failed_at, failure_category, failure_fault)
        VALUES (p_verification.id, channels[step], p_verification.purpose, p_verification.locale,
                p_template_version, p_max_attempts, CASE WHEN step = 1 THEN 'primary' ELSE 'fallback' END,
                p_policies[step], p_after_seconds[step], CASE WHEN step > 1 THEN p_destinations[step] END,
                CASE WHEN step = 1 THEN now()
                     ELSE p_verification.created_at + make_interval(secs => p_after_seconds[step]) END,
                CASE WHEN suppressed THEN 'failed' ELSE 'ready' END,
                CASE WHEN suppressed THEN now() END, CASE WHEN suppressed THEN now() END,
                CASE WHEN suppressed THEN 'suppressed' END, CASE WHEN suppressed THEN 'recipient' END)
        RETURNING id INTO intent_id;
        IF suppressed THEN
            failed_ids := failed_ids || intent_id;
        END IF;
    END LOOP;
    IF cardinality(failed_ids) > 0 THEN
        SELECT jsonb_agg(jsonb_build_object('intent_id', f, 'category', 'suppressed', 'fault', 'recipient'))
          INTO failed_reasons FROM unnest(failed_ids) AS f;
        PERFORM delivery_failed(failed_ids, failed_reasons);
    END IF;
END $$;

-- name: stored_final_reports_v2
-- stored_final_reports_v2: the final provider reports already stored about attempts a statement is
-- about to end: the settle (outbox/queries.sql:settle, intents `attempting`), the reconciler's
-- lost-lease sweep (outbox/queries.sql:lose_leases, `attempting`) and its lookup that finds an
-- ambiguous SMS at the provider (outbox/queries.sql:resolve_lookup, `ambiguous`).
-- One per intent of p_intent_ids still in p_status whose current attempt a stored report ended:
--   delivered      -> the intent was reported delivered (the first terminal fact wins): the first
--                     report of the attempt that says so (a delivered or read message, a call a
--                     person answered); failure and reason NULL;
--   not delivered  -> the first report of the attempt that says the message will never arrive, with
--                     the failure's text and reason as observe_deliveries writes them.
-- Each with the provider's reference the report carried (a MessageSid, a CallSid, an X-Message-Id):
-- the message or call it is about, which the attempt log's settlement names when the report settles
-- an attempt whose own outcome had none (ambiguous: the provider's answer never came).
-- The intents are locked first (in id order, as the reports' ingest locks the in-flight ones it
-- stores reports about), and the reports read after the lock is held (a VOLATILE function's query
-- takes a fresh snapshot): a report ingested concurrently is either read here or applied by its
-- ingest after the caller commits, never neither nor both.
CREATE OR REPLACE FUNCTION stored_final_reports_v2(p_intent_ids bigint[], p_status text)
RETURNS TABLE (intent_id bigint, delivered boolean, failure text, category text, code text, provider text,
               fault text, provider_ref text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM delivery_intents WHERE id = ANY (p_intent_ids) AND status = p_status
      ORDER BY id FOR NO KEY UPDATE;
    RETURN QUERY
    SELECT i.id, NOT o.permanent,
           CASE WHEN o.permanent
                THEN left(o.event || coalesce(' ' || o.detail, '') || coalesce(' code ' || o.error_code, ''), 200) END,
           CASE WHEN o.permanent THEN coalesce(o.category, 'unknown') END,
           CASE WHEN o.permanent THEN o.reason_code END, CASE WHEN o.permanent THEN o.reason_provider END,
           CASE WHEN o.permanent THEN coalesce(o.fault, 'transient_or_unknown') END, o.provider_ref
      FROM delivery_intents AS i
     CROSS JOIN LATERAL (
         SELECT * FROM delivery_observations AS o
          WHERE o.intent_id = i.id AND o.attempt_id = i.id || ':' || i.attempts
            AND CASE WHEN i.delivered_at IS NULL THEN o.permanent
                     ELSE o.event IN ('delivered', 'read') AND NOT o.permanent END
          ORDER BY o.id LIMIT 1) AS o
     WHERE i.id = ANY (p_intent_ids) AND i.status = p_status;
END $$;

-- name: stored_final_reports
-- stored_final_reports: stored_final_reports_v2's reports that fail, without their provider
-- reference, for the statements of the previous release while a rolling deploy still runs them;
-- delete it in the next release.
CREATE OR REPLACE FUNCTION stored_final_reports(p_intent_ids bigint[], p_status text)
RETURNS TABLE (intent_id bigint, failure text, category text, code text, provider text, fault text)
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM delivery_intents WHERE id = ANY (p_intent_ids) AND status = p_status
      ORDER BY id FOR NO KEY UPDATE;
    RETURN QUERY
    SELECT i.id, left(o.event || coalesce(' ' || o.detail, '') || coalesce(' code ' || o.error_code, ''), 200),
           coalesce(o.category, 'unknown'), o.reason_code, o.reason_provider,
           coalesce(o.fault, 'transient_or_unknown')
      FROM delivery_intents AS i
     CROSS JOIN LATERAL (
         SELECT * FROM delivery_observations AS o
          WHERE o.intent_id = i.id AND o.attempt_id = i.id || ':' || i.attempts AND o.permanent
          ORDER BY o.id LIMIT 1) AS o
     WHERE i.id = ANY (p_intent_ids) AND i.status = p_status AND i.delivered_at IS NULL;
END $$;

-- name: observe_deliveries
-- transition: accepted, ambiguous, retryable, claimed, attempting -> accepted, failed
-- why: a provider report: delivered (accepted), or final (undeliverable; an ambiguous send settled as sent)
-- observe_deliveries: what providers reported about intents, applied to them by the statement that
-- stored the reports (delivery/functions.sql ingest_delivery_reports), so both commit together.
-- p_reports: a JSON array with one {intent_id, delivered_at, delivered_attempt, delivered_ref, failure,
-- failure_attempt, failure_ref, reason} per intent: its batch's first `delivered` report (when, the
-- attempt it names and the provider's reference of the message or call) and its final one about the
-- latest attempt a final report names (the failure's text, the attempt, the provider's reference, and
-- its reason {category, code, provider, fault}).
-- The attempt that counts is the intent's last one that may have reached the provider (`last_sent`:
-- its log has an ambiguous or accepted outcome), when nothing was handed to a provider after it: the
-- intent is accepted or ambiguous (it is the current attempt), retryable (any later attempt ended
-- unsent: released, refused, never created), or claimed again with its next attempt not started yet.
--   delivered -> delivered_at (the first report wins), also while the attempt is still in flight (the
--                report overtook our settle) unless a final report of it came first; an intent whose
--                attempt that may have been sent the provider reports delivered was sent: accepted,
--                with an attempt-log row naming the report's reference (the intent keeps it too);
--                `delivery.delivered` (opt-in) for each delivery;
--   final     -> an intent not yet delivered whose attempt that counts it reports is failed with its
--                reason (undeliverable): the report proves the provider created the message or call,
--                so it was sent and ends here, with an attempt-log row (`accepted`, `provider_report`),
--                and no second message or call goes to the person; one still in flight is failed by
--                the settle that ends it (stored_final_reports_v2). A report of an attempt that a later
--                one, handed to the provider, superseded changes nothing.
-- Settled while claimed again, the intent's lease is cleared and the attempt the claim began ends with
-- a 'released' row, as a suppression ends one: the worker's start is fenced out, nothing is sent.
-- The caller locks every intent it may change first (in flight, claimed, ambiguous, retryable), so
-- their state read here is the one this statement changes. The first terminal fact wins: a delivered
-- intent is never made undeliverable later, an undeliverable one never delivered. Returns how many
-- were reported delivered, and the intents made undeliverable with their reasons (for
-- delivery_failed(), which the caller runs).
CREATE OR REPLACE FUNCTION observe_deliveries(p_reports jsonb)
RETURNS TABLE (delivered integer, failed_ids bigint[], failed_reasons jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    WITH per_intent AS MATERIALIZED (  -- computed once, not per updated row
        SELECT r.*, i0.status AS old_status, i0.lease_owner AS old_owner, i0.lease_version AS old_version,
               i0.last_claimed_at AS old_claimed_at, i0.attempts AS old_attempts,
               -- nothing after the attempt that counts was handed to a provider
               (i0.status IN ('accepted', 'ambiguous', 'retryable', 'claimed')
                OR (i0.status = 'attempting' AND i0.sending_at IS NULL)) AS idle,
               (SELECT max(a.attempt_number) FROM delivery_attempts AS a
                 WHERE a.intent_id = i0.id AND a.outcome IN ('ambiguous', 'accepted')) AS last_sent,
               EXISTS (SELECT 1 FROM delivery_attempts AS a
                        WHERE a.intent_id = i0.id AND a.attempt_id = r.delivered_attempt
                          AND a.outcome IN ('ambiguous', 'accepted')) AS delivered_may_be_sent
          FROM jsonb_to_recordset(p_reports)
               AS r(intent_id bigint, delivered_at timestamptz, delivered_attempt text, delivered_ref text,
                    failure text, failure_attempt text, failure_ref text, reason jsonb)
          LEFT JOIN delivery_intents AS i0 ON i0.id = r.intent_id
    ), judged AS (
        SELECT p.*,
               -- a delivery of an attempt that may have been sent ends an intent not yet accepted
               p.delivered_at IS NOT NULL AND p.idle AND p.old_status <> 'accepted' AND p.delivered_may_be_sent
                   AS accepts,
               -- a final report of the attempt that counts
               p.failure IS NOT NULL AND p.delivered_at IS NULL AND p.idle
                   AND p.failure_attempt = p.intent_id || ':' || p.last_sent AS fails
          FROM per_intent AS p
    ), changed AS (
        UPDATE delivery_intents AS i
           SET (status, delivered_at, completed_at, undeliverable_reason, last_error, failed_at, failure_category,
                failure_code, failure_provider, failure_fault, provider_ref, lease_owner, lease_until) = (
                   SELECT CASE WHEN p.accepts THEN 'accepted' WHEN d.fails THEN 'failed' ELSE i.status END,
                          CASE WHEN d.delivers THEN least(i.delivered_at, p.delivered_at) ELSE i.delivered_at END,
                          CASE WHEN p.accepts OR (d.fails AND i.status <> 'accepted') THEN now()
                               ELSE i.completed_at END,
                          CASE WHEN d.fails THEN p.failure ELSE i.undeliverable_reason END,
                          CASE WHEN d.fails THEN left('undeliverable: ' || p.failure, 500)
                               WHEN p.accepts THEN NULL ELSE i.last_error END,
                          CASE WHEN d.fails THEN now() ELSE i.failed_at END,
                          CASE WHEN d.fails THEN p.reason ->> 'category' ELSE i.failure_category END,
                          CASE WHEN d.fails THEN left(p.reason ->> 'code', 64) ELSE i.failure_code END,
                          CASE WHEN d.fails THEN p.reason ->> 'provider' ELSE i.failure_provider END,
                          CASE WHEN d.fails THEN p.reason ->> 'fault' ELSE i.failure_fault END,
                          CASE WHEN d.fails AND i.status <> 'accepted' THEN coalesce(p.failure_ref, i.provider_ref)
                               WHEN p.accepts THEN coalesce(p.delivered_ref, i.provider_ref)
                               ELSE i.provider_ref END,
                          CASE WHEN p.accepts OR d.fails THEN NULL ELSE i.lease_owner END,
                          CASE WHEN p.accepts OR d.fails THEN NULL ELSE i.lease_until END
                     FROM (SELECT p.delivered_at IS NOT NULL AND i.undeliverable_reason IS NULL AS delivers,
                                  p.fails AND i.delivered_at IS NULL AS fails) AS d),
               updated_at = now()
          FROM judged AS p
         WHERE i.id = p.intent_id
           AND ((p.delivered_at IS NOT NULL AND i.undeliverable_reason IS NULL
                 AND (p.accepts OR i.status = 'accepted'
                      -- in flight: the report overtook our settle (the provider answered, its event came
                      -- before our commit); settle leaves delivered_at alone, so it is kept, unless a
                      -- final report of that attempt came first (stored_final_reports_v2 applies it)
                      OR (i.status = 'attempting' AND i.sending_at IS NOT NULL
                          AND NOT EXISTS (SELECT 1 FROM delivery_observations AS o
                                           WHERE o.intent_id = i.id AND o.attempt_id = i.id || ':' || i.attempts
                                             AND o.permanent))))
                OR (p.fails AND i.delivered_at IS NULL))
        RETURNING i.id, i.verification_id, i.channel, i.role, i.template_version, p.delivered_attempt, p.reason,
                  i.delivered_at, p.delivered_at IS NOT NULL AS reported,
                  (p.old_status <> 'failed' AND i.status = 'failed') AS made_undeliverable,
                  (p.old_status <> 'accepted' AND i.status = 'accepted') AS made_accepted,
                  -- the attempt a final report settled as sent (its log row below), with the provider's reference
                  CASE WHEN p.old_status <> 'accepted' AND i.status = 'failed' THEN p.failure_attempt END
                      AS settled_attempt,
                  p.failure_ref, p.delivered_ref,
                  (p.delivered_at IS NOT NULL AND i.undeliverable_reason IS NULL) AS now_delivered,
                  -- claimed again and settled before the start: the attempt that claim began ends here
                  (p.old_status = 'attempting' AND i.status IN ('accepted', 'failed')) AS ends_begun,
                  p.old_owner, p.old_version, p.old_claimed_at, p.old_attempts
    ), released AS (
        INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                       lease_version, outcome, error_class, error_detail, claimed_at)
        SELECT c.id || ':' || c.old_attempts, c.id, c.old_attempts, c.channel, c.template_version, c.old_owner,
               c.old_version, 'released', 'released',
               'claimed again; a provider report settled an earlier attempt before its send started', c.old_claimed_at
          FROM changed AS c
         WHERE c.ends_begun
        RETURNING 1
    ), explained AS (
        -- ambiguous/retryable -> accepted or failed is a settlement of the reported attempt: the provider
        -- created the message or call, so the attempt was accepted, and the log says so (a final report
        -- is an observation beside it, as for an attempt accepted at its settle)
        INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, outcome,
                                       error_class, provider_ref, attempted_at)
        SELECT a.attempt_id, c.id, a.attempt_number, c.channel, c.template_version, 'accepted', 'provider_report',
               coalesce(CASE WHEN c.made_accepted THEN c.delivered_ref ELSE c.failure_ref END, a.provider_ref),
               a.attempted_at
          FROM changed AS c
          JOIN delivery_attempts AS a
            ON a.intent_id = c.id AND a.outcome = 'attempting'
           AND a.attempt_id = CASE WHEN c.made_accepted THEN c.delivered_attempt ELSE c.settled_attempt END
         WHERE c.made_accepted OR c.settled_attempt IS NOT NULL
        ON CONFLICT (intent_id, attempt_number, outcome) DO NOTHING  -- one row per attempt and outcome
        RETURNING 1
    ), delivered_events AS (
        -- `delivery.delivered` (opt-in): one per delivery, the first time it is reported delivered
        SELECT record_event(v, 'delivery.delivered',
                            jsonb_build_object('delivery', jsonb_build_object('step', intent_step(c.verification_id, c.id),
                                               'channel', c.channel, 'role', c.role,
                                               'status', 'delivered', 'delivered_at', rfc3339(c.delivered_at))),
                            c.channel) AS written
          FROM changed AS c JOIN verifications AS v ON v.id = c.verification_id
         WHERE c.now_delivered AND c.role <> 'event'
    )
    SELECT (count(*) FILTER (WHERE reported AND NOT made_undeliverable))::integer,
           array_agg(id) FILTER (WHERE made_undeliverable),
           jsonb_agg(reason || jsonb_build_object('intent_id', id, 'status', 'undeliverable'))
               FILTER (WHERE made_undeliverable)
      FROM changed, (SELECT count(*) FROM explained) AS e, (SELECT count(*) FROM delivered_events) AS d,
           (SELECT count(*) FROM released) AS r;
END $$;
