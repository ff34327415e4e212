-- Provider reports: their verdicts and their ingest: one file of the delivery package's functions and
-- views (platform/catalogue.py; applied by platform/migrations.py in file-name order).

-- name: report_verdicts
-- report_verdicts: the parts of each input event's verdict that are not stored on its observation
-- (the reason's code, the fault's scope: account | route | message, and the reason's provider), by
-- dedup_key, read beside the new rows. The reason's provider is the one the message went out through
-- (`smtp` for mail SendGrid relayed over SMTP), which may not be the reporting one
-- (delivery_observations.provider).
CREATE OR REPLACE FUNCTION report_verdicts(p_events jsonb)
RETURNS TABLE (dedup_key text, code text, scope text, provider text)
LANGUAGE sql IMMUTABLE AS $$
    SELECT DISTINCT ON (e.dedup_key) e.dedup_key, e.code, e.scope, e.provider
      FROM jsonb_to_recordset(p_events) AS e(dedup_key text, code text, scope text, provider text)
     ORDER BY e.dedup_key
$$;

-- name: ingest_delivery_reports
-- ingest_delivery_reports: one verified batch of provider reports in one round trip and one
-- transaction. p_events: a JSON array the edge (api/delivery_reports.py) built from the provider's
-- batch, each {dedup_key, intent_id, attempt_id, provider_ref, event, detail, error_code, permanent,
-- fault, category, code, scope, provider_at, provider}: the report and its verdict
-- (delivery/classification/, which this function never re-derives; `provider`: the one the reason
-- names, the sending one, else p_provider, the reporting one). Each event is linked to its attempt (SendGrid: custom_args
-- intent_id + attempt_id, else sg_message_id's X-Message-Id; Twilio: the attempt its StatusCallback URL
-- names, as signed (api/delivery_reports.py), else the MessageSid of an SMS or a WhatsApp message, the
-- CallSid of a call = the attempt's provider_ref, which exists only once the attempt settled), appended
-- to delivery_observations once (a repeat is a duplicate), and only new rows have effects:
--   delivered        -> the intent's delivered_at; an ambiguous or retryable one accepted
--                       (observe_deliveries, the outbox's: the intents' statuses are its); a WhatsApp
--                       message's `read` says it was delivered too (its `delivered` may be lost);
--   permanent        -> final, about the attempt that counts (the last that may have reached the
--                       provider, nothing handed to one after it: observe_deliveries says which): an
--                       intent not yet delivered is failed with its reason (undeliverable; the report
--                       proves the provider created it: sent), also one claimed again whose next
--                       attempt has not started, and delivery_failed() runs for it; one whose attempt
--                       is still in flight is failed by the settle that ends it
--                       (stored_final_reports_v2 reads the report, its reason_code and reason_provider);
--   fault recipient  -> the exact destination goes on destination_suppressions for p_suppress_for
--                       (NULL: until an operator clears it), final or not (a spam report);
--   scope account    -> a fault of our account: counted towards holding the intent's channel
--                       (record_sender_faults); it never suppresses;
--   scope route      -> a fault of our sender towards the intent's route (its destination's country,
--                       its receiving domain): counted towards holding that route only
--                       (record_route_outcomes); it never suppresses;
--   anything else    -> the observation only (deferred, sent, queued, ...).
-- Out-of-order reports are fine: the first terminal fact wins (a delivered intent is never made
-- undeliverable later; an undeliverable one never delivered), and the log keeps every report.
-- The verdicts' codes beside the new rows: report_verdicts.
CREATE OR REPLACE FUNCTION ingest_delivery_reports(p_provider text, p_events jsonb, p_suppress_for interval,
                                                   p_hold_after integer, p_hold_window interval,
                                                   p_hold_for interval, p_route_min_destinations integer,
                                                   p_route_min_share float8)
RETURNS TABLE (received integer, stored integer, duplicates integer, unknown integer,
               delivered integer, undeliverable integer, suppressed integer, sender_faults integer, held integer,
               route_faults integer, routes_held integer)
LANGUAGE plpgsql AS $$
DECLARE
    -- the channels whose attempts the provider's reports may name (a Twilio sid: an SMS, a WhatsApp
    -- message or a call)
    v_channels text[] := CASE p_provider WHEN 'sendgrid' THEN ARRAY['email'] ELSE ARRAY['sms', 'whatsapp', 'voice'] END;
    n_received integer := jsonb_array_length(p_events);
    n_linked integer;
    n_stored integer;
    n_delivered integer;
    n_suppressed integer;
    n_sender integer := 0;
    n_held integer := 0;
    n_route integer;
    n_routes_held integer := 0;
    v_route_faults jsonb;
    v_fault record;
    failed_ids bigint[];
    failed_reasons jsonb;
    new_ids bigint[];
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_events) AS e(
            dedup_key text, intent_id bigint, attempt_id text, provider_ref text, event text, detail text,
            error_code integer, permanent boolean, fault text, category text, code text, provider text,
            provider_at timestamptz)
    ), linked AS (
        SELECT e.*, coalesce(by_args.intent_id, by_ref.intent_id) AS link_intent,
               coalesce(by_args.attempt_id, by_ref.attempt_id) AS link_attempt
          FROM input AS e
          LEFT JOIN LATERAL (
              SELECT a.intent_id, a.attempt_id FROM delivery_attempts AS a
               WHERE a.attempt_id = e.attempt_id AND a.outcome = 'attempting' AND a.intent_id = e.intent_id
                 AND a.channel = ANY (v_channels)
          ) AS by_args ON true
          LEFT JOIN LATERAL (
              SELECT a.intent_id, a.attempt_id FROM delivery_attempts AS a
               WHERE by_args.intent_id IS NULL AND a.provider_ref = e.provider_ref AND a.channel = ANY (v_channels)
               ORDER BY a.id DESC LIMIT 1
          ) AS by_ref ON true
    ), inserted AS (
        INSERT INTO delivery_observations (provider, dedup_key, intent_id, attempt_id, provider_ref, event, detail,
                                           error_code, permanent, fault, category, reason_code, reason_provider,
                                           provider_at)
        SELECT p_provider, l.dedup_key, l.link_intent, l.link_attempt, l.provider_ref, l.event, l.detail,
               l.error_code, coalesce(l.permanent, false), l.fault, l.category,
               CASE WHEN l.permanent THEN left(l.code, 64) END,
               CASE WHEN l.permanent THEN coalesce(l.provider, p_provider) END, l.provider_at
          FROM linked AS l
         WHERE l.link_intent IS NOT NULL
        ON CONFLICT (provider, dedup_key) DO NOTHING
        RETURNING id
    )
    SELECT (SELECT count(*) FROM linked WHERE link_intent IS NOT NULL), (SELECT array_agg(id) FROM inserted)
      INTO n_linked, new_ids;
    n_stored := coalesce(cardinality(new_ids), 0);

    -- An attempt claimed or in flight (its send not settled), ambiguous or retryable (the reconciler's
    -- lookup, its resolve and the next claim may end it or try again) is locked here (in id order, as
    -- the settle and the lookup lock theirs: stored_final_reports_v2; the resolve and the claim skip a
    -- locked row), so one of them running now finishes first and the effects below see its outcome,
    -- or it waits and then sees this report's: a settle or a lookup reads these reports itself once
    -- it holds the lock, the claim no longer finds a failed intent. Either way a final report's
    -- effect is applied once, and never lost.
    PERFORM 1 FROM delivery_intents
      WHERE id IN (SELECT o.intent_id FROM delivery_observations AS o WHERE o.id = ANY (new_ids))
        AND status IN ('claimed', 'attempting', 'ambiguous', 'retryable')
      ORDER BY id FOR NO KEY UPDATE;

    -- Effects on the intents (the outbox's: observe_deliveries), one per intent: the batch's first
    -- delivered report and its final one about the latest attempt any names (observe_deliveries,
    -- after the lock, applies it only if that is the attempt that counts).
    SELECT o.delivered, o.failed_ids, o.failed_reasons INTO n_delivered, failed_ids, failed_reasons
      FROM observe_deliveries((
          SELECT jsonb_agg(jsonb_build_object('intent_id', p.intent_id, 'delivered_at', p.delivered_at,
                                              'delivered_attempt', p.delivered_attempt,
                                              'delivered_ref', p.delivered_ref, 'failure', p.failure,
                                              'failure_attempt', p.failure_attempt, 'failure_ref', p.failure_ref,
                                              'reason', p.reason))
            FROM (SELECT o.intent_id,
                         min(coalesce(o.provider_at, o.received_at)) FILTER (WHERE o.event IN ('delivered', 'read')) AS delivered_at,
                         (array_agg(o.attempt_id ORDER BY o.id) FILTER (WHERE o.event IN ('delivered', 'read')))[1] AS delivered_attempt,
                         (array_agg(o.provider_ref ORDER BY o.id) FILTER (WHERE o.event IN ('delivered', 'read')))[1] AS delivered_ref,
                         (array_agg(left(o.event || coalesce(' ' || o.detail, '') || coalesce(' code ' || o.error_code, ''), 200)
                                    ORDER BY o.attempt_number DESC, o.id) FILTER (WHERE o.final))[1] AS failure,
                         (array_agg(o.attempt_id ORDER BY o.attempt_number DESC, o.id) FILTER (WHERE o.final))[1] AS failure_attempt,
                         (array_agg(o.provider_ref ORDER BY o.attempt_number DESC, o.id) FILTER (WHERE o.final))[1] AS failure_ref,
                         (array_agg(jsonb_build_object('category', coalesce(o.category, 'unknown'), 'code', r.code,
                                                       'provider', coalesce(r.provider, p_provider),
                                                       'fault', coalesce(o.fault, 'transient_or_unknown'))
                                    ORDER BY o.attempt_number DESC, o.id) FILTER (WHERE o.final))[1] AS reason
                    FROM (SELECT o.*, o.permanent AND o.attempt_id IS NOT NULL AS final,
                                 nullif(split_part(o.attempt_id, ':', 2), '')::integer AS attempt_number
                            FROM delivery_observations AS o
                           WHERE o.id = ANY (new_ids)) AS o
                    LEFT JOIN report_verdicts(p_events) AS r ON r.dedup_key = o.dedup_key
                   GROUP BY o.intent_id) AS p)) AS o;

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

    -- faults of our account: they count towards holding their intent's channel (a WhatsApp sender's
    -- fault holds WhatsApp, not SMS), never suppress
    FOR v_fault IN
        SELECT i.channel, count(*)::integer AS faults, min(o.category) AS category, min(r.code) AS code
          FROM delivery_observations AS o
          JOIN report_verdicts(p_events) AS r ON r.dedup_key = o.dedup_key AND r.scope = 'account'
          JOIN delivery_intents AS i ON i.id = o.intent_id
         WHERE o.id = ANY (new_ids)
         GROUP BY i.channel ORDER BY i.channel
    LOOP
        n_sender := n_sender + v_fault.faults;
        n_held := n_held + record_sender_faults(v_fault.channel, v_fault.faults, v_fault.category, v_fault.code,
                                                p_provider, p_hold_after, p_hold_window, p_hold_for)::integer;
    END LOOP;

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
