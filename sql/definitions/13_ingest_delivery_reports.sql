-- ingest_delivery_reports: one verified batch of provider reports in one round trip and one
-- transaction. p_events: a JSON array the edge (api/delivery_reports.py) built from the provider's
-- batch, each {dedup_key, intent_id, attempt_id, provider_ref, event, detail, error_code, permanent,
-- fault, category, code, scope, provider_at, provider}: the report and its verdict
-- (delivery/classification/, which this function never re-derives; `provider`: the one the reason
-- names, the sending one, else p_provider, the reporting one). Each event is linked to its attempt (SendGrid: custom_args
-- intent_id + attempt_id, else sg_message_id's X-Message-Id; Twilio: MessageSid = the attempt's
-- provider_ref), appended to delivery_observations once (a repeat is a duplicate), and only new rows
-- have effects:
--   delivered        -> delivered_at (first report wins), also while the attempt is still in flight
--                       (the report overtook our settle); an ambiguous or retryable intent whose
--                       attempt the provider reports delivered was sent: accepted, with an
--                       attempt-log row; `delivery.delivered` (opt-in) for each delivery;
--   permanent        -> final: an accepted intent not yet delivered is failed with its reason
--                       (undeliverable), and delivery_failed() (sql/definitions/08) runs for it;
--   fault recipient  -> the exact destination goes on destination_suppressions for p_suppress_for
--                       (NULL: until an operator clears it), final or not (a spam report);
--   scope account    -> a fault of our account: counted towards holding the channel
--                       (record_sender_faults, sql/definitions/19); it never suppresses;
--   scope route      -> a fault of our sender towards the intent's route (its destination's country,
--                       its receiving domain): counted towards holding that route only
--                       (record_route_outcomes, sql/definitions/26); it never suppresses;
--   anything else    -> the observation only (deferred, sent, queued, ...).
-- Out-of-order reports are fine: the first terminal fact wins (a delivered intent is never made
-- undeliverable later; an undeliverable one never delivered), and the log keeps every report.
-- Changing the arguments or the result type needs `DROP FUNCTION IF EXISTS <old signature>;` first.
-- The verdicts' codes beside the new rows: report_verdicts (sql/definitions/22).
DROP FUNCTION IF EXISTS ingest_delivery_reports(text, jsonb, interval);
DROP FUNCTION IF EXISTS ingest_delivery_reports(text, jsonb, interval, integer, interval, interval);
CREATE OR REPLACE FUNCTION ingest_delivery_reports(p_provider text, p_events jsonb, p_suppress_for interval,
                                                   p_hold_after integer, p_hold_window interval,
                                                   p_hold_for interval, p_route_min_destinations integer,
                                                   p_route_min_share float8)
RETURNS TABLE (received integer, stored integer, duplicates integer, unknown integer,
               delivered integer, undeliverable integer, suppressed integer, sender_faults integer, held integer,
               route_faults integer, routes_held integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_channel text := CASE p_provider WHEN 'sendgrid' THEN 'email' ELSE 'sms' END;
    n_received integer := jsonb_array_length(p_events);
    n_linked integer;
    n_stored integer;
    n_delivered integer;
    n_suppressed integer;
    n_sender integer;
    n_held integer := 0;
    n_route integer;
    n_routes_held integer := 0;
    v_route_faults jsonb;
    v_category text;
    v_code text;
    failed_ids bigint[];
    failed_reasons jsonb;
    new_ids bigint[];
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_events) AS e(
            dedup_key text, intent_id bigint, attempt_id text, provider_ref text, event text, detail text,
            error_code integer, permanent boolean, fault text, category text, provider_at timestamptz)
    ), linked AS (
        SELECT e.*, coalesce(by_args.intent_id, by_ref.intent_id) AS link_intent,
               coalesce(by_args.attempt_id, by_ref.attempt_id) AS link_attempt
          FROM input AS e
          LEFT JOIN LATERAL (
              SELECT a.intent_id, a.attempt_id FROM delivery_attempts AS a
               WHERE a.attempt_id = e.attempt_id AND a.outcome = 'attempting' AND a.intent_id = e.intent_id
                 AND a.channel = v_channel
          ) AS by_args ON true
          LEFT JOIN LATERAL (
              SELECT a.intent_id, a.attempt_id FROM delivery_attempts AS a
               WHERE by_args.intent_id IS NULL AND a.provider_ref = e.provider_ref AND a.channel = v_channel
               ORDER BY a.id DESC LIMIT 1
          ) AS by_ref ON true
    ), inserted AS (
        INSERT INTO delivery_observations (provider, dedup_key, intent_id, attempt_id, provider_ref, event, detail,
                                           error_code, permanent, fault, category, provider_at)
        SELECT p_provider, l.dedup_key, l.link_intent, l.link_attempt, l.provider_ref, l.event, l.detail,
               l.error_code, coalesce(l.permanent, false), l.fault, l.category, l.provider_at
          FROM linked AS l
         WHERE l.link_intent IS NOT NULL
        ON CONFLICT (provider, dedup_key) DO NOTHING
        RETURNING id
    )
    SELECT (SELECT count(*) FROM linked WHERE link_intent IS NOT NULL), (SELECT array_agg(id) FROM inserted)
      INTO n_linked, new_ids;
    n_stored := coalesce(cardinality(new_ids), 0);

    -- Effects, one UPDATE per intent: the batch's first delivered report and first final one.
    WITH per_intent AS MATERIALIZED (  -- computed once, not per updated row
        SELECT o.intent_id,
               min(coalesce(o.provider_at, o.received_at)) FILTER (WHERE o.event = 'delivered') AS delivered_at,
               (array_agg(o.attempt_id ORDER BY o.id) FILTER (WHERE o.event = 'delivered'))[1] AS delivered_attempt,
               (array_agg(left(o.event || coalesce(' ' || o.detail, '') || coalesce(' code ' || o.error_code, ''), 200)
                          ORDER BY o.id) FILTER (WHERE o.permanent))[1] AS failure,
               (array_agg(jsonb_build_object('category', coalesce(o.category, 'unknown'), 'code', r.code,
                                             'provider', coalesce(r.provider, p_provider),
                                             'fault', coalesce(o.fault, 'transient_or_unknown'))
                          ORDER BY o.id) FILTER (WHERE o.permanent))[1] AS reason,
               (SELECT i0.status FROM delivery_intents AS i0 WHERE i0.id = o.intent_id) AS old_status
          FROM delivery_observations AS o
          LEFT JOIN report_verdicts(p_events) AS r ON r.dedup_key = o.dedup_key
         WHERE o.id = ANY (new_ids)
         GROUP BY o.intent_id
    ), changed AS (
        UPDATE delivery_intents AS i
           SET delivered_at = CASE WHEN p.delivered_at IS NOT NULL AND i.undeliverable_reason IS NULL
                                   THEN least(i.delivered_at, p.delivered_at) ELSE i.delivered_at END,
               status = CASE WHEN p.delivered_at IS NOT NULL AND i.status IN ('ambiguous', 'retryable')
                             THEN 'accepted'
                             WHEN p.failure IS NOT NULL AND p.delivered_at IS NULL AND i.status = 'accepted'
                                  AND i.delivered_at IS NULL
                             THEN 'failed' ELSE i.status END,
               completed_at = CASE WHEN p.delivered_at IS NOT NULL AND i.status IN ('ambiguous', 'retryable')
                                   THEN now() ELSE i.completed_at END,
               undeliverable_reason = CASE WHEN p.failure IS NOT NULL AND p.delivered_at IS NULL
                                                AND i.status = 'accepted' AND i.delivered_at IS NULL
                                           THEN p.failure ELSE i.undeliverable_reason END,
               last_error = CASE WHEN p.failure IS NOT NULL AND p.delivered_at IS NULL AND i.status = 'accepted'
                                      AND i.delivered_at IS NULL
                                 THEN left('undeliverable: ' || p.failure, 500)
                                 WHEN p.delivered_at IS NOT NULL AND i.status IN ('ambiguous', 'retryable')
                                 THEN NULL ELSE i.last_error END,
               failed_at = CASE WHEN p.failure IS NOT NULL AND p.delivered_at IS NULL AND i.status = 'accepted'
                                     AND i.delivered_at IS NULL
                                THEN now() ELSE i.failed_at END,
               failure_category = CASE WHEN p.failure IS NOT NULL AND p.delivered_at IS NULL AND i.status = 'accepted'
                                            AND i.delivered_at IS NULL
                                       THEN p.reason ->> 'category' ELSE i.failure_category END,
               failure_code = CASE WHEN p.failure IS NOT NULL AND p.delivered_at IS NULL AND i.status = 'accepted'
                                        AND i.delivered_at IS NULL
                                   THEN left(p.reason ->> 'code', 64) ELSE i.failure_code END,
               failure_provider = CASE WHEN p.failure IS NOT NULL AND p.delivered_at IS NULL AND i.status = 'accepted'
                                            AND i.delivered_at IS NULL
                                       THEN p.reason ->> 'provider' ELSE i.failure_provider END,
               failure_fault = CASE WHEN p.failure IS NOT NULL AND p.delivered_at IS NULL AND i.status = 'accepted'
                                         AND i.delivered_at IS NULL
                                    THEN p.reason ->> 'fault' ELSE i.failure_fault END,
               updated_at = now()
          FROM per_intent AS p
         WHERE i.id = p.intent_id
           AND ((p.delivered_at IS NOT NULL AND i.undeliverable_reason IS NULL
                 -- 'attempting': the report overtook our settle (the provider answered, its event
                 -- came before our commit); settle leaves delivered_at alone, so it is kept
                 AND (i.status IN ('accepted', 'ambiguous', 'retryable', 'attempting')))
                OR (p.failure IS NOT NULL AND i.status = 'accepted' AND i.delivered_at IS NULL))
        RETURNING i.id, i.verification_id, i.channel, i.role, i.template_version, p.delivered_attempt, p.reason,
                  i.delivered_at, p.delivered_at IS NOT NULL AS reported,
                  (p.old_status = 'accepted' AND i.status = 'failed') AS made_undeliverable,
                  (p.old_status IN ('ambiguous', 'retryable') AND i.status = 'accepted') AS made_accepted,
                  (p.delivered_at IS NOT NULL AND i.undeliverable_reason IS NULL) AS now_delivered
    ), explained AS (
        -- ambiguous/retryable -> accepted is a settlement of the reported attempt: the log says so
        INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, outcome,
                                       error_class, provider_ref, attempted_at)
        SELECT a.attempt_id, c.id, a.attempt_number, c.channel, c.template_version, 'accepted', 'provider_report',
               a.provider_ref, a.attempted_at
          FROM changed AS c
          JOIN delivery_attempts AS a ON a.intent_id = c.id AND a.attempt_id = c.delivered_attempt AND a.outcome = 'attempting'
         WHERE c.made_accepted
        ON CONFLICT (intent_id, attempt_number, outcome) DO NOTHING  -- one row per attempt and outcome
        RETURNING 1
    ), delivered_events AS (
        -- `delivery.delivered` (opt-in): one per delivery, the first time it is reported delivered
        SELECT record_event(v, 'delivery.delivered',
                            jsonb_build_object('delivery', jsonb_build_object('channel', c.channel, 'role', c.role,
                                               'status', 'delivered', 'delivered_at', rfc3339(c.delivered_at))),
                            c.channel) AS written
          FROM changed AS c JOIN verifications AS v ON v.id = c.verification_id
         WHERE c.now_delivered AND c.role <> 'event'
    )
    SELECT count(*) FILTER (WHERE reported AND NOT made_undeliverable), array_agg(id) FILTER (WHERE made_undeliverable),
           jsonb_agg(reason || jsonb_build_object('intent_id', id, 'status', 'undeliverable'))
               FILTER (WHERE made_undeliverable)
      INTO n_delivered, failed_ids, failed_reasons
      FROM changed, (SELECT count(*) FROM explained) AS e, (SELECT count(*) FROM delivered_events) AS d;

    -- what a failure for good sets off (fallback brought forward, delivery.bounced, delivery.failed)
    PERFORM delivery_failed(failed_ids, failed_reasons);

    -- the recipient's faults: the exact destination is refused by create until cleared or expired
    SELECT suppress_destinations(jsonb_agg(jsonb_build_object('intent_id', o.intent_id,
                                                              'category', coalesce(o.category, 'unknown'),
                                                              'code', r.code) ORDER BY o.id),
                                 p_suppress_for)
      INTO n_suppressed
      FROM delivery_observations AS o
      LEFT JOIN report_verdicts(p_events) AS r ON r.dedup_key = o.dedup_key
     WHERE o.id = ANY (new_ids) AND o.fault = 'recipient';

    -- faults of our account: they count towards holding the channel, never suppress
    SELECT count(*), min(o.category), min(r.code) INTO n_sender, v_category, v_code
      FROM delivery_observations AS o
      JOIN report_verdicts(p_events) AS r ON r.dedup_key = o.dedup_key AND r.scope = 'account'
     WHERE o.id = ANY (new_ids);
    IF n_sender > 0 THEN
        n_held := record_sender_faults(v_channel, n_sender, v_category, v_code, p_provider, p_hold_after,
                                       p_hold_window, p_hold_for)::integer;
    END IF;

    -- faults of our sender towards one route: they count towards holding that route, never suppress
    -- (their sends were counted when settled, if a run of the route was open then)
    SELECT count(*), jsonb_agg(jsonb_build_object('intent_id', o.intent_id, 'sent', false, 'fault', true,
                                                  'category', o.category, 'code', r.code, 'provider', p_provider))
      INTO n_route, v_route_faults
      FROM delivery_observations AS o
      JOIN report_verdicts(p_events) AS r ON r.dedup_key = o.dedup_key AND r.scope = 'route'
     WHERE o.id = ANY (new_ids);
    IF n_route > 0 THEN
        n_routes_held := record_route_outcomes(v_route_faults, p_route_min_destinations, p_route_min_share,
                                               p_hold_window, p_hold_for);
    END IF;

    RETURN QUERY SELECT n_received, n_stored, n_linked - n_stored, n_received - n_linked, n_delivered,
                        coalesce(cardinality(failed_ids), 0), coalesce(n_suppressed, 0), coalesce(n_sender, 0),
                        coalesce(n_held, 0), coalesce(n_route, 0), coalesce(n_routes_held, 0);
END $$;
