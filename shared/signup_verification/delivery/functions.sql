-- The delivery package's functions and views (platform/catalogue.py; applied by platform/migrations.py).

-- name: routes_held
-- routes_held: whether any route of any channel is held now (the claim asks once per statement, and
-- only then reads each claimed intent's route).
CREATE OR REPLACE FUNCTION routes_held() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM channel_holds WHERE route <> '' AND held_until > now())
$$;

-- name: channel_held
-- channel_held: the claim takes no intent of a held channel (an account fault's hold: route '').
-- Its intents stay eligible: not failed, not charged an attempt. STABLE: evaluated once per statement.
CREATE OR REPLACE FUNCTION channel_held(p_channel text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM channel_holds WHERE channel = p_channel AND route = '' AND held_until > now())
$$;

-- name: channel_slowed
-- channel_slowed: a provider asked us to slow down on this channel (a 429, channel_pacing):
-- the claim takes none of its intents until slow_until (they stay eligible: not failed, not charged).
-- STABLE: evaluated once per statement.
CREATE OR REPLACE FUNCTION channel_slowed(p_channel text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM channel_pacing WHERE channel = p_channel AND slow_until > now())
$$;

-- name: delivery_route
-- delivery_route: the route of one message intent, the unit a route fault may hold
-- (delivery/classification/, record_route_outcomes, outbox/queries.sql:claim). A phone channel's intent's
-- (SMS, WhatsApp, voice) route is its destination's ISO country as create recorded it (create_events.country, from the number's
-- numbering plan: verifications/abuse.py); an email intent's is the receiving domain of its address,
-- lower-cased. Never a whole destination. A webhook event, a redacted address or an intent without
-- its create record has none (NULL): its faults hold nothing.
-- With the route: the destination's keyed digest (create_events' exact key, as the suppression
-- list's) and a hash of the account, which tell a run's distinct destinations and accounts apart.
-- One intent per call, so that it inlines into the caller as three primary-key probes (callers put
-- it in a LATERAL subquery with OFFSET 0: never a join over the whole table).
CREATE OR REPLACE FUNCTION delivery_route(p_intent_id bigint)
RETURNS TABLE (intent_id bigint, channel text, route text, destination_key bytea, account_key bigint)
LANGUAGE sql STABLE AS $$
    SELECT i.id, i.channel,
           CASE WHEN i.channel IN ('sms', 'whatsapp', 'voice') THEN ce.country
                WHEN strpos(d.address, '@') > 0 THEN nullif(lower(split_part(d.address, '@', -1)), '')
           END,
           coalesce(ce.exact_key, ce.destination_key),
           hashtextextended(v.account_id, 0)
      FROM delivery_intents AS i
      JOIN verifications AS v ON v.id = i.verification_id
     CROSS JOIN LATERAL (SELECT CASE WHEN i.role = 'fallback' THEN i.destination ELSE v.destination END AS address) AS d
      LEFT JOIN create_events AS ce  -- the step's own row: a verification's steps have channels of their own
        ON ce.verification_id = i.verification_id AND ce.channel = i.channel AND ce.role <> 'refused'
     WHERE i.id = p_intent_id AND i.channel IN ('email', 'sms', 'whatsapp', 'voice') AND i.role <> 'event'
$$;

-- name: record_sender_faults
-- What an account fault of our side sets off beyond its delivery (outbox/config.py FailurePolicy),
-- called by the statement that records the failure so both commit together. The fault's scope
-- (delivery/classification/) says which run it counts in: an account fault in its channel's, a route
-- fault in its route's (record_route_outcomes); a message fault in neither.
--
-- record_sender_faults: p_faults account faults of one channel (credentials, a suspended account, an
-- exhausted quota, a sender that reaches no destination) in this statement. They count in the
-- channel's run (its channel_holds row with route ''): the faults since its window started (a window
-- older than p_window starts afresh). Once the run reaches p_hold_after, the whole channel is held for
-- p_hold_for (outbox/queries.sql:claim takes none of its intents). Returns true when this call started a hold.
CREATE OR REPLACE FUNCTION record_sender_faults(p_channel text, p_faults integer, p_category text, p_code text,
                                                p_provider text, p_hold_after integer, p_window interval,
                                                p_hold_for interval) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    started boolean;
BEGIN
    IF p_faults IS NULL OR p_faults <= 0 OR p_channel IS NULL OR p_channel NOT IN ('email', 'sms', 'whatsapp', 'voice') THEN
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

-- name: record_route_outcomes
-- What a route fault of our side sets off beyond its delivery (outbox/config.py FailurePolicy), called
-- by the statement that records the sends and faults (outbox/queries.sql:settle, the reports' ingest) so both
-- commit together. A route (delivery_route) is one SMS destination country or one email
-- receiving domain: the most a route fault (delivery/classification/) may hold.
--
-- record_route_outcomes: the sends and route faults of one statement, per route. p_outcomes: a JSON
-- array of {intent_id, sent, fault, category, code, provider}: a send just settled (`sent`: it counts
-- in its route's open run) and/or a route fault of that intent (our sender towards its destination's
-- country or receiving domain: Twilio 21606 or 30007, an SMTP 5.7.x refusal, ...).
-- Each route keeps a run like the channel's: its faults since its window started (a window older
-- than p_window starts afresh), the sends settled meanwhile (counted only while a run is open, so a
-- route with no recent fault costs nothing), and the distinct destinations and accounts its faults
-- came from (keyed digests and hashes, at most p_min_destinations of each kept). The route is held
-- for p_hold_for once its run's faults came from at least p_min_destinations distinct destinations
-- and as many distinct accounts, and make up at least p_min_share of the route's recent sends: the
-- greatest of the sends counted since the run started, the SMS verifications created for that
-- country within p_window (create_events, on its country index) and the faults themselves. An email
-- route has no such index of its recent creates (the domain is not kept apart), so its run is judged
-- only once it has counted the domain's sends for a tenth of p_window: faults reported in a burst
-- about sends made before the run started cannot outweigh the domain's traffic unseen. Faults from
-- one destination or one account never hold anything; a hold never stops more than its route.
-- Runs of routes that are over and not held are forgotten first: a route's name is kept no longer
-- than it serves. Returns how many route holds this call started.
CREATE OR REPLACE FUNCTION record_route_outcomes(p_outcomes jsonb, p_min_destinations integer, p_min_share float8,
                                                 p_window interval, p_hold_for interval) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    touched text[];
    started integer;
BEGIN
    IF p_outcomes IS NULL OR jsonb_array_length(p_outcomes) = 0 THEN
        RETURN 0;
    END IF;
    -- Concurrent settles and report batches touch several routes' rows each, in no common order: one
    -- at a time here (until commit), so they can never deadlock. Only while a route has faults.
    PERFORM pg_advisory_xact_lock(hashtextextended('record_route_outcomes', 0));
    DELETE FROM channel_holds
     WHERE route <> '' AND window_started_at <= now() - p_window AND (held_until IS NULL OR held_until <= now());
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_outcomes)
            AS o(intent_id bigint, sent boolean, fault boolean, category text, code text, provider text)
    ), routed AS (
        SELECT r.channel, r.route, coalesce(o.sent, false) AS sent, coalesce(o.fault, false) AS fault,
               o.category, o.code, o.provider, r.destination_key, r.account_key
          FROM input AS o
         CROSS JOIN LATERAL (SELECT * FROM delivery_route(o.intent_id) OFFSET 0) AS r  -- primary-key probes per row
         WHERE r.route IS NOT NULL
    ), per_route AS (
        SELECT channel, route, count(*) FILTER (WHERE fault)::integer AS faults,
               count(*) FILTER (WHERE sent)::integer AS sends,
               coalesce(array_agg(DISTINCT destination_key) FILTER (WHERE fault AND destination_key IS NOT NULL),
                        '{}') AS destinations,
               coalesce(array_agg(DISTINCT account_key) FILTER (WHERE fault), '{}') AS accounts,
               (array_agg(category) FILTER (WHERE fault))[1] AS category,
               (array_agg(code) FILTER (WHERE fault))[1] AS code,
               (array_agg(provider) FILTER (WHERE fault))[1] AS provider
          FROM routed
         GROUP BY channel, route
    ), faulted AS (
        INSERT INTO channel_holds AS h (channel, route, faults, attempts, window_started_at, last_fault_at, category,
                                        code, provider, destinations, accounts)
        SELECT p.channel, p.route, p.faults, p.sends, now(), now(), coalesce(p.category, 'unknown'), left(p.code, 64),
               p.provider, p.destinations[1:p_min_destinations], p.accounts[1:p_min_destinations]
          FROM per_route AS p
         WHERE p.faults > 0
        ON CONFLICT (channel, route) DO UPDATE
           SET faults = CASE WHEN h.window_started_at > now() - p_window THEN h.faults + excluded.faults
                             ELSE excluded.faults END,
               attempts = CASE WHEN h.window_started_at > now() - p_window THEN h.attempts + excluded.attempts
                               ELSE excluded.attempts END,
               destinations = CASE WHEN h.window_started_at > now() - p_window
                                   THEN ARRAY(SELECT DISTINCT d FROM unnest(h.destinations || excluded.destinations) AS d
                                               LIMIT p_min_destinations)
                                   ELSE excluded.destinations END,
               accounts = CASE WHEN h.window_started_at > now() - p_window
                               THEN ARRAY(SELECT DISTINCT a FROM unnest(h.accounts || excluded.accounts) AS a
                                           LIMIT p_min_destinations)
                               ELSE excluded.accounts END,
               window_started_at = CASE WHEN h.window_started_at > now() - p_window THEN h.window_started_at
                                        ELSE now() END,
               last_fault_at = now(), category = excluded.category, code = excluded.code, provider = excluded.provider
        RETURNING h.channel || ':' || h.route AS key
    ), counted AS (
        -- sends of routes without a fault here: counted in their run, if one is open (stale ones are gone)
        UPDATE channel_holds AS h SET attempts = h.attempts + p.sends
          FROM per_route AS p
         WHERE p.faults = 0 AND p.sends > 0 AND h.channel = p.channel AND h.route = p.route
           AND h.window_started_at > now() - p_window
        RETURNING 1
    )
    SELECT array_agg(f.key) INTO touched FROM faulted AS f, (SELECT count(*) FROM counted) AS c;
    IF touched IS NULL THEN
        RETURN 0;
    END IF;
    UPDATE channel_holds AS h SET held_at = now(), held_until = now() + p_hold_for
     WHERE h.route <> '' AND h.channel || ':' || h.route = ANY (touched)
       AND (h.held_until IS NULL OR h.held_until <= now())
       AND cardinality(h.destinations) >= p_min_destinations AND cardinality(h.accounts) >= p_min_destinations
       AND (h.channel IN ('sms', 'whatsapp', 'voice') OR h.window_started_at <= now() - p_window / 10)
       AND h.faults >= p_min_share * greatest(
               h.attempts, h.faults,
               CASE WHEN h.channel IN ('sms', 'whatsapp', 'voice')
                    THEN (SELECT count(*) FROM create_events AS ce
                           WHERE ce.country = h.route AND ce.created_at > now() - p_window AND ce.channel = h.channel)
                    ELSE 0 END);
    GET DIAGNOSTICS started = ROW_COUNT;
    RETURN started;
END $$;

-- name: fanout_reserve
-- fanout_reserve: the scheduled dispatch invocation asks for p_wanted more parallel invocations of
-- p_deployment; at most p_max may be live at once (DISPATCH_MAX_PARALLEL, the queue's bound). Under a
-- transaction-scoped advisory lock on the deployment, so two scheduled invocations deciding at once
-- (the hand-over between the scheduler's two jobs) cannot both take the last slots. Live = `until`
-- still ahead; rows past it (a crashed invocation, a task never delivered) are deleted here.
-- Returns the slots reserved (each one task to enqueue; none when p_wanted is 0, which only counts)
-- and the invocations live after it.
CREATE OR REPLACE FUNCTION fanout_reserve(p_deployment text, p_started_by text, p_wanted integer, p_max integer,
                                          p_until interval)
RETURNS TABLE (slots text[], live integer)
LANGUAGE plpgsql AS $$
DECLARE
    running integer;
    granted integer;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('fanout:' || p_deployment, 0));
    DELETE FROM dispatch_invocations AS d WHERE d.deployment = p_deployment AND d.until <= now();
    SELECT count(*) INTO running FROM dispatch_invocations AS d WHERE d.deployment = p_deployment;
    granted := greatest(0, least(p_wanted, p_max - running));
    RETURN QUERY
    WITH reserved AS (
        INSERT INTO dispatch_invocations (slot, deployment, started_by, until)
        SELECT p_started_by || '/' || gen_random_uuid(), p_deployment, p_started_by, now() + p_until
          FROM generate_series(1, granted)
        RETURNING dispatch_invocations.slot
    )
    SELECT coalesce(array_agg(r.slot), '{}'), running + granted FROM reserved AS r;
END $$;

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
