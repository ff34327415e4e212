-- Provider reports applied to the intents: one file of the outbox package's functions and views
-- (platform/catalogue.py; applied by platform/migrations.py in file-name order).

-- name: stored_final_reports_v2
-- stored_final_reports_v2: the final provider reports already stored about attempts a statement is
-- about to end: the settle (outbox/queries/settle.sql:settle, intents `attempting`), the reconciler's
-- lost-lease sweep (outbox/queries/reconcile.sql:lose_leases, `attempting`) and its lookup that finds an
-- ambiguous SMS at the provider (outbox/queries/reconcile.sql:resolve_lookup, `ambiguous`).
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
-- stored the reports (delivery/functions/30_reports.sql:ingest_delivery_reports), so both commit together.
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
