-- Create's helpers: the channel policy, the abuse limits and the created answer: one file of the
-- verifications package's functions and views (platform/catalogue.py; applied by platform/migrations.py
-- in file-name order).

-- name: channel_policy
-- Channel policy: the name create records on the intents.
-- channel_policy: 'single' (no fallback), 'both' (fallback after 0 s: both at once), 'fallback'.
CREATE OR REPLACE FUNCTION channel_policy(p_fallback_channel text, p_after_seconds integer)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_fallback_channel IS NULL THEN 'single'
                WHEN p_after_seconds = 0 THEN 'both'
                ELSE 'fallback' END
$$;

-- name: limit_wait
-- Abuse limits at create: a helper of create_limit_wait.
-- limit_wait: seconds until the p_limit-th newest event of a key leaves the window (0 = room left).
-- Reads at most p_limit rows of one (key, created_at) index range.
-- STABLE, not IMMUTABLE: it reads now(). Declared IMMUTABLE it could not be inlined, and plpgsql ran
-- it through the SQL-function executor, planning it on every call (~8 µs, three times per create).
CREATE OR REPLACE FUNCTION limit_wait(p_times timestamptz[], p_limit integer, p_window interval)
RETURNS integer LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_limit IS NULL OR coalesce(array_length(p_times, 1), 0) < p_limit THEN 0
                ELSE greatest(1, ceil(extract(epoch FROM p_times[p_limit] + p_window - now())))::integer END
$$;

-- name: create_limit_wait
-- Abuse limits at create, called by create_verification inside its transaction.
-- create_limit_wait: the longest wait any velocity limit asks for, and which limit it is.
-- The destination and account limits are exact (create_verification holds their advisory locks);
-- prefix, country and client limits are not locked (that would serialise a whole country), so
-- concurrent creates may overshoot them by the number in flight.
CREATE OR REPLACE FUNCTION create_limit_wait(
    p_channel text, p_account_id text, p_destination_key bytea, p_prefix_key bytea, p_country text,
    p_client_key bytea, p_window interval, p_spacing interval,
    p_per_destination integer, p_per_account integer, p_per_prefix integer, p_per_country integer,
    p_per_client integer)
RETURNS TABLE (wait_seconds integer, reason text)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    by_destination timestamptz[];
    by_account timestamptz[];
    by_prefix timestamptz[];
    by_country timestamptz[];
    by_client timestamptz[];
    wait integer;
BEGIN
    -- Every key's recent creations in one statement (one executor start instead of up to
    -- five). Each ARRAY(...) reads one (key, created_at) index range, newest first, at most its limit;
    -- ARRAY(subquery) keeps the subquery's order, so no aggregate sorts it again.
    SELECT ARRAY(SELECT created_at FROM create_events
                  WHERE channel = p_channel AND destination_key = p_destination_key AND created_at > now() - p_window
                  ORDER BY created_at DESC LIMIT p_per_destination),
           ARRAY(SELECT created_at FROM create_events
                  WHERE account_id = p_account_id AND created_at > now() - p_window
                    AND role IN ('primary', 'refused')  -- a later step's destination is not another creation
                  ORDER BY created_at DESC LIMIT p_per_account),
           CASE WHEN p_prefix_key IS NOT NULL THEN ARRAY(SELECT created_at FROM create_events
                  WHERE prefix_key = p_prefix_key AND created_at > now() - p_window
                  ORDER BY created_at DESC LIMIT p_per_prefix) END,
           CASE WHEN p_country IS NOT NULL THEN ARRAY(SELECT created_at FROM create_events
                  WHERE country = p_country AND created_at > now() - p_window
                  ORDER BY created_at DESC LIMIT p_per_country) END,
           CASE WHEN p_client_key IS NOT NULL THEN ARRAY(SELECT created_at FROM create_events
                  WHERE client_key = p_client_key AND created_at > now() - p_window
                  ORDER BY created_at DESC LIMIT p_per_client) END
      INTO by_destination, by_account, by_prefix, by_country, by_client;

    wait_seconds := 0;
    reason := NULL;
    wait := limit_wait(by_destination, p_per_destination, p_window);
    IF by_destination[1] > now() - p_spacing THEN
        wait := greatest(wait, ceil(extract(epoch FROM by_destination[1] + p_spacing - now()))::integer);
    END IF;
    IF wait > wait_seconds THEN wait_seconds := wait; reason := 'destination'; END IF;
    wait := limit_wait(by_account, p_per_account, p_window);
    IF wait > wait_seconds THEN wait_seconds := wait; reason := 'account'; END IF;
    IF p_prefix_key IS NOT NULL THEN
        wait := limit_wait(by_prefix, p_per_prefix, p_window);
        IF wait > wait_seconds THEN wait_seconds := wait; reason := 'prefix'; END IF;
    END IF;
    IF p_country IS NOT NULL THEN
        wait := limit_wait(by_country, p_per_country, p_window);
        IF wait > wait_seconds THEN wait_seconds := wait; reason := 'country'; END IF;
    END IF;
    IF p_client_key IS NOT NULL THEN
        wait := limit_wait(by_client, p_per_client, p_window);
        IF wait > wait_seconds THEN wait_seconds := wait; reason := 'client'; END IF;
    END IF;
    RETURN NEXT;
END $$;

-- name: created_answer_v2
-- created_answer_v2: what a 'created' create answers (the verification's fields, ISO timestamps; the
-- later steps' channels and timing, never their destinations: `fallback` for step 2, and `steps`, every
-- step in order, when there is a third). One definition for the first answer and every replay of it
-- (create_verification_v2 rebuilds it from the idempotency record's columns), so the two cannot
-- drift apart; a record written before three steps has no step 3 and answers as it did. A single
-- SELECT of an expression: the planner inlines it where it is called.
CREATE OR REPLACE FUNCTION created_answer_v2(
    p_id uuid, p_account_id text, p_channel text, p_created_at timestamptz, p_expires_at timestamptz,
    p_fallback_channel text, p_fallback_after_seconds integer, p_step3_channel text, p_step3_after_seconds integer)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
               'verification_id', p_id,
               'account_id', p_account_id,
               'channel', p_channel,
               'status', 'pending',
               'expires_at', rfc3339(p_expires_at),
               'created_at', rfc3339(p_created_at))
           || CASE WHEN p_fallback_channel IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('fallback', jsonb_build_object(
                            'channel', p_fallback_channel, 'after_seconds', p_fallback_after_seconds,
                            'policy', channel_policy(p_fallback_channel, p_fallback_after_seconds))) END
           || CASE WHEN p_step3_channel IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('steps', jsonb_build_array(
                            jsonb_build_object('channel', p_channel, 'after_seconds', 0),
                            jsonb_build_object('channel', p_fallback_channel, 'after_seconds', p_fallback_after_seconds),
                            jsonb_build_object('channel', p_step3_channel, 'after_seconds', p_step3_after_seconds))) END
$$;

-- name: count_refused_create
-- Abuse limits at create, called by create_verification inside its transaction.
-- count_refused_create: a create refused with an answer about someone else (the suppression list's
-- 422, a 429 of the destination, prefix or country limits) counts against the caller's own limits
-- as a create would: a `refused` create_events row with the account and the client key only, so the
-- account and client limits read it (create_limit_wait: every role but
-- `fallback`; the client index) and no destination, prefix or country limit does (their keys are
-- NULL). p_id is the verification id the refused create would have had: the row's key, naming no
-- verification. The reconciler's reap_refused_creates duty deletes the rows once past every window.
CREATE OR REPLACE FUNCTION count_refused_create(p_id uuid, p_account_id text, p_channel text, p_client_key bytea)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO create_events (verification_id, account_id, channel, destination_key, client_key, role)
    VALUES (p_id, p_account_id, p_channel, NULL, p_client_key, 'refused')
$$;
