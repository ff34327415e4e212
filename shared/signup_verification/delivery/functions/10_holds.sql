-- Channel and route holds: what a sender's or a route's faults hold: one file of the delivery package's
-- functions and views (platform/catalogue.py; applied by platform/migrations.py in file-name order).

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
-- (delivery/classification/, record_route_outcomes, outbox/queries/claim.sql:claim). A phone channel's intent's
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
-- p_hold_for (outbox/queries/claim.sql:claim takes none of its intents). Returns true when this call started a hold.
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
-- by the statement that records the sends and faults (outbox/queries/settle.sql:settle, the reports' ingest) so both
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
