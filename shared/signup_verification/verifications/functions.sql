-- The verifications package's functions and views (platform/catalogue.py; applied by platform/migrations.py).

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

-- name: destination_suppression
-- destination_suppression: why create must refuse this destination, or NULL. A destination whose
-- delivery failed for the recipient's fault (a hard bounce, an invalid or unsubscribed number, a
-- spam report) is on destination_suppressions under the keyed digest of its exact address
-- (key_kind 'exact': verifications/abuse.py exact_email; never the alias-folded rate-limit key, so
-- a bounce of 'victim+x@gmail.com' never refuses 'victim@gmail.com'), until an operator clears it
-- (`verifyctl suppression clear`) or its expires_at passes (SUPPRESSION_DAYS; NULL: no expiry).
-- Entries from before exact keys (key_kind 'alias') match on the alias key until they expire.
-- p_exact_keys / p_alias_keys: the digests under every key of the token ring (abuse.py
-- destination_keys), so an entry written before a key rotation still matches.
-- plpgsql, not sql: a scalar sql function with a FROM clause is not inlined, and create_verification
-- then ran it through the SQL-function executor, which plans its query on every call; plpgsql keeps
-- the plan for the session.
CREATE OR REPLACE FUNCTION destination_suppression(p_channel text, p_exact_keys bytea[], p_alias_keys bytea[])
RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT coalesce(s.category, s.reason) FROM destination_suppressions AS s
             WHERE s.channel = p_channel AND s.destination_key = ANY (p_exact_keys || p_alias_keys)
               AND CASE s.key_kind WHEN 'exact' THEN s.destination_key = ANY (p_exact_keys)
                                   ELSE s.destination_key = ANY (p_alias_keys) END
               AND (s.expires_at IS NULL OR s.expires_at > now())
             LIMIT 1);
END $$;

-- name: suppress_destinations
-- What a failure for good sets off beyond its delivery (outbox/failure_policy.py), called by the
-- statement that records the failure so both commit together.
--
-- suppress_destinations: the exact destinations of failed deliveries whose fault was the
-- recipient's go on the suppression list (create refuses them: destination_suppression). p_failures is a
-- JSON array of {intent_id, category, code} (the recipient's faults only); the destination key is
-- create_events' exact key of the intent's verification and channel (the alias key where the two
-- are the same digest). p_for: how long (NULL: until an operator clears it).
CREATE OR REPLACE FUNCTION suppress_destinations(p_failures jsonb, p_for interval) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    written integer;
BEGIN
    IF p_failures IS NULL OR jsonb_array_length(p_failures) = 0 THEN
        RETURN 0;
    END IF;
    WITH failed AS (
        SELECT DISTINCT ON (ce.channel, coalesce(ce.exact_key, ce.destination_key))
               ce.channel, coalesce(ce.exact_key, ce.destination_key) AS destination_key, f.intent_id,
               f.category, left(f.category || coalesce(' ' || f.code, ''), 200) AS reason
          FROM jsonb_to_recordset(p_failures) AS f(intent_id bigint, category text, code text)
          JOIN delivery_intents AS i ON i.id = f.intent_id
          JOIN create_events AS ce ON ce.verification_id = i.verification_id AND ce.channel = i.channel
         ORDER BY ce.channel, coalesce(ce.exact_key, ce.destination_key), f.intent_id
    ), listed AS (
        INSERT INTO destination_suppressions AS s (channel, destination_key, reason, intent_id, expires_at,
                                                   key_kind, category)
        SELECT f.channel, f.destination_key, f.reason, f.intent_id, now() + p_for, 'exact', f.category
          FROM failed AS f
        ON CONFLICT (channel, destination_key) DO UPDATE
           SET reason = excluded.reason, intent_id = excluded.intent_id, created_at = now(),
               expires_at = excluded.expires_at, key_kind = 'exact', category = excluded.category
        RETURNING 1
    )
    SELECT count(*) INTO written FROM listed;
    RETURN written;
END $$;

-- name: create_verification_v2
-- create_verification_v2: the whole create path in one round trip and one transaction.
-- A verification of up to three steps: the first is p_channel / p_destination, the second the
-- fallback (p_fallback_*), the third p_step3_* (each NULL when absent; a third only after a second),
-- each on a channel of its own, with its own secret's digest, destination and abuse keys, and
-- after_seconds not decreasing (checked at the edge).
--   outcome 'created'      -> the idempotency record, verification and intents were written;
--                             verification = the created verification's fields (ISO timestamps)
--   outcome 'replayed'     -> the first request with this key was created; verification = its fields
--   outcome 'mismatch'     -> the key was used with a different request
--   outcome 'rate_limited' -> nothing kept (so the same key may be retried later) but, when the limit
--                             was not the caller's own, the refusal's count; retry_after in s
--   outcome 'suppressed'   -> a step's destination is on the suppression list and
--                             p_suppressed_answer is 'refuse': nothing kept but the refusal's count
--                             (count_refused_create). With 'silent' the
--                             verification is created and the suppressed destination's delivery is
--                             failed at once (reason `suppressed`), never sent: delivery_failed
--                             brings the next step forward and records the events.
-- Outcomes only: the HTTP edge (api/create.py) decides statuses and bodies, also for replays.
-- A concurrent request with the same key waits on the key's advisory lock until the first
-- commits, then replays it: callers never see 409 for an in-flight key.
CREATE OR REPLACE FUNCTION create_verification_v2(
    p_scope text, p_key text, p_fingerprint bytea, p_idempotency_ttl interval,
    p_id uuid, p_account_id text, p_channel text, p_destination text, p_purpose text, p_locale text,
    p_template_version text, p_key_id text, p_token_nonce bytea, p_token_digest bytea,
    p_ttl interval, p_max_confirm_failures integer, p_max_attempts integer,
    p_rate_limit integer, p_rate_window interval, p_rate_spacing interval,
    -- abuse limits (create_events): keyed digests computed by verifications/abuse.py
    p_destination_key bytea, p_prefix_key bytea, p_country text, p_client_key bytea,
    p_per_account integer, p_per_prefix integer, p_per_country integer, p_per_client integer,
    -- channel policy: all NULL = no fallback. The fallback's
    -- destination is normalised and policy-checked by the caller, its keys are its own abuse keys.
    p_fallback_channel text, p_fallback_destination text, p_fallback_after_seconds integer,
    p_fallback_digest bytea, p_fallback_destination_key bytea, p_fallback_prefix_key bytea,
    p_fallback_country text,
    -- where the pages send the person back to (checked at the edge)
    p_return_url text,
    -- the suppression list (destination_suppression): each destination's exact-address digest and its alias
    -- digest under every key of the ring, so an entry written before a key rotation still matches;
    -- the exact keys create_events keeps (NULL: the same digest as the alias key); refuse | silent
    p_suppression_keys bytea[], p_fallback_suppression_keys bytea[],
    p_alias_suppression_keys bytea[], p_fallback_alias_suppression_keys bytea[],
    p_exact_key bytea, p_fallback_exact_key bytea, p_suppressed_answer text,
    -- step 3, as the fallback's parameters are step 2 (all NULL: no third step)
    p_step3_channel text, p_step3_destination text, p_step3_after_seconds integer, p_step3_digest bytea,
    p_step3_destination_key bytea, p_step3_prefix_key bytea, p_step3_country text,
    p_step3_suppression_keys bytea[], p_step3_alias_suppression_keys bytea[], p_step3_exact_key bytea)
RETURNS TABLE (outcome text, verification jsonb, retry_after integer)
LANGUAGE plpgsql AS $$
DECLARE
    existing idempotency_keys%ROWTYPE;
    wait_seconds integer := 0;
    wait_reason text;
    fallback_reason text;
    created verifications%ROWTYPE;
    fields jsonb;
    superseded_ids uuid[];
    fallback_wait integer := 0;
    primary_suppressed boolean;
    fallback_suppressed boolean := false;
    step3_suppressed boolean := false;
BEGIN
    -- ---- idempotency record: written complete at insert time -------------------------------------
    -- Everything the 'created' answer holds is known before the verification is written (its id is
    -- the caller's, its times are now() and now() + ttl, its status 'pending'), so the record is
    -- inserted with outcome 'created' and its data, and never updated afterwards. Until this
    -- transaction commits nobody sees it (a concurrent same-key request waits on the unique index);
    -- a rate-limited request deletes it, an error rolls it back.
    -- The answer's shape is created_answer_v2; the record keeps its inputs only.
    fields := created_answer_v2(p_id, p_account_id, p_channel, now(), now() + p_ttl,
                                p_fallback_channel, p_fallback_after_seconds, p_step3_channel, p_step3_after_seconds);
    -- One request per key at a time: a concurrent same-key request waits here until this transaction
    -- ends, then reads what it left (the replay, or nothing after a rollback). A lock, not INSERT ...
    -- ON CONFLICT: the speculative insertion wrote a confirmation record to the WAL on every create.
    -- Taken before the destination and account locks below, in every create: no deadlock.
    PERFORM pg_advisory_xact_lock(hashtextextended('idempotency:' || p_scope || ':' || p_key, 0));
    -- FOR UPDATE: the reaper (SKIP LOCKED) leaves an expired record alone while it is taken over.
    SELECT * INTO existing FROM idempotency_keys WHERE scope = p_scope AND key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO idempotency_keys (scope, key, fingerprint, expires_at, outcome, verification_id, account_id,
                                      channel, verification_expires_at, fallback_channel, fallback_after_seconds,
                                      step3_channel, step3_after_seconds)
        VALUES (p_scope, p_key, p_fingerprint, now() + p_idempotency_ttl, 'created', p_id, p_account_id,
                p_channel, now() + p_ttl, p_fallback_channel, p_fallback_after_seconds, p_step3_channel,
                p_step3_after_seconds);
    ELSIF existing.expires_at <= now() THEN
        -- An expired key the reconciler has not reaped yet counts as unused.
        UPDATE idempotency_keys SET fingerprint = p_fingerprint, outcome = 'created',
               verification_id = p_id, account_id = p_account_id, channel = p_channel,
               verification_expires_at = now() + p_ttl, fallback_channel = p_fallback_channel,
               fallback_after_seconds = p_fallback_after_seconds, step3_channel = p_step3_channel,
               step3_after_seconds = p_step3_after_seconds,
               created_at = now(), expires_at = now() + p_idempotency_ttl
         WHERE scope = p_scope AND key = p_key;
    ELSIF existing.fingerprint <> p_fingerprint THEN
        RETURN QUERY SELECT 'mismatch'::text, NULL::jsonb, NULL::integer;
        RETURN;
    ELSE
        -- Only a 'created' outcome is ever stored (the others keep no record), as the answer's inputs.
        RETURN QUERY SELECT 'replayed'::text,
               created_answer_v2(existing.verification_id, existing.account_id, existing.channel, existing.created_at,
                                 existing.verification_expires_at, existing.fallback_channel,
                                 existing.fallback_after_seconds, existing.step3_channel,
                                 existing.step3_after_seconds),
               NULL::integer;
        RETURN;
    END IF;
    -- ---- end of idempotency record -------------------------------------------------------------

    -- ---- abuse limits ---------------------------------------------------------------------------
    -- Serialise creations per destination, so the rate limit cannot be raced, then per account, so
    -- the per-account limit and the supersede below see a concurrent create of the same account (its
    -- snapshot would miss an uncommitted one and leave two pending). Always in this order: no deadlock.
    -- The destination key is the canonical destination's keyed digest: 'v.ictim+1@googlemail.com'
    -- and 'victim@gmail.com' reach one inbox and share one limit.
    -- Every later step's destination is locked too; all in one sorted order (no deadlock).
    PERFORM pg_advisory_xact_lock(d.k) FROM (
        SELECT hashtextextended('destination:' || c || ':' || encode(k, 'hex'), 0) AS k
          FROM (VALUES (p_channel, p_destination_key), (p_fallback_channel, p_fallback_destination_key),
                       (p_step3_channel, p_step3_destination_key)) AS t(c, k)
         WHERE k IS NOT NULL ORDER BY 1) AS d;
    PERFORM pg_advisory_xact_lock(hashtextextended('account:' || p_account_id, 0));
    SELECT l.wait_seconds, l.reason INTO wait_seconds, wait_reason FROM create_limit_wait(
        p_channel, p_account_id, p_destination_key, p_prefix_key, p_country, p_client_key,
        p_rate_window, p_rate_spacing, p_rate_limit, p_per_account, p_per_prefix, p_per_country,
        p_per_client) l;
    -- Each later step's destination has its own limits (destination, prefix, country); the account and
    -- client limits count creations and were checked above.
    IF p_fallback_channel IS NOT NULL THEN
        SELECT l.wait_seconds, l.reason INTO fallback_wait, fallback_reason FROM create_limit_wait(
            p_fallback_channel, p_account_id, p_fallback_destination_key, p_fallback_prefix_key,
            p_fallback_country, NULL, p_rate_window, p_rate_spacing, p_rate_limit, NULL, p_per_prefix,
            p_per_country, NULL) l;
        IF fallback_wait > wait_seconds THEN
            wait_seconds := fallback_wait;
            wait_reason := 'fallback ' || fallback_reason;
        END IF;
    END IF;
    IF p_step3_channel IS NOT NULL THEN
        SELECT l.wait_seconds, l.reason INTO fallback_wait, fallback_reason FROM create_limit_wait(
            p_step3_channel, p_account_id, p_step3_destination_key, p_step3_prefix_key,
            p_step3_country, NULL, p_rate_window, p_rate_spacing, p_rate_limit, NULL, p_per_prefix,
            p_per_country, NULL) l;
        IF fallback_wait > wait_seconds THEN
            wait_seconds := fallback_wait;
            wait_reason := 'step3 ' || fallback_reason;
        END IF;
    END IF;
    IF wait_seconds > 0 THEN
        -- Not stored against the key: the same request may be retried once the wait is over.
        DELETE FROM idempotency_keys WHERE scope = p_scope AND key = p_key;
        -- A refusal that tells the caller about someone else (this address or number, its prefix,
        -- its country asked recently) costs the caller one create of its own limits; one by its own
        -- account or client limit tells it nothing new and is not counted again.
        IF wait_reason NOT IN ('account', 'client') THEN
            PERFORM count_refused_create(p_id, p_account_id, p_channel, p_client_key);
        END IF;
        RETURN QUERY SELECT 'rate_limited'::text, NULL::jsonb, wait_seconds;
        RETURN;
    END IF;
    -- ---- end of abuse limits ------------------------------------------------------------------

    -- ---- suppression list (destination_suppression) -------------------------------------------------
    -- Checked after the caller's own limits: a caller who would be rate-limited learns nothing about
    -- the list. 'refuse' (the default): 422, nothing kept, so the same key works once the entry is
    -- cleared; 'silent': created, and the suppressed delivery fails at once below.
    primary_suppressed := destination_suppression(p_channel,
        coalesce(p_suppression_keys, ARRAY[coalesce(p_exact_key, p_destination_key)]),
        coalesce(p_alias_suppression_keys, ARRAY[p_destination_key])) IS NOT NULL;
    IF p_fallback_channel IS NOT NULL THEN
        fallback_suppressed := destination_suppression(p_fallback_channel,
            coalesce(p_fallback_suppression_keys, ARRAY[coalesce(p_fallback_exact_key, p_fallback_destination_key)]),
            coalesce(p_fallback_alias_suppression_keys, ARRAY[p_fallback_destination_key])) IS NOT NULL;
    END IF;
    IF p_step3_channel IS NOT NULL THEN
        step3_suppressed := destination_suppression(p_step3_channel,
            coalesce(p_step3_suppression_keys, ARRAY[coalesce(p_step3_exact_key, p_step3_destination_key)]),
            coalesce(p_step3_alias_suppression_keys, ARRAY[p_step3_destination_key])) IS NOT NULL;
    END IF;
    IF (primary_suppressed OR fallback_suppressed OR step3_suppressed) AND coalesce(p_suppressed_answer, 'refuse') <> 'silent' THEN
        DELETE FROM idempotency_keys WHERE scope = p_scope AND key = p_key;
        -- The answer tells whether an address bounced before: each one costs the caller a create of
        -- its account and client limits, so the list cannot be read out faster than they allow.
        PERFORM count_refused_create(p_id, p_account_id, p_channel, p_client_key);
        RETURN QUERY SELECT 'suppressed'::text,
               jsonb_build_object('field', CASE WHEN primary_suppressed THEN 'destination'
                                                WHEN fallback_suppressed THEN 'fallback' ELSE 'step3' END),
               NULL::integer;
        RETURN;
    END IF;
    -- ---- end of suppression list ---------------------------------------------------------------

    INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id,
                               token_nonce, token_digest, expires_at, max_confirm_failures,
                               fallback_channel, fallback_digest, return_url, step3_channel, step3_digest)
    VALUES (p_id, p_account_id, p_channel, p_destination, p_purpose, p_locale, p_key_id,
            p_token_nonce, p_token_digest, now() + p_ttl, p_max_confirm_failures,
            p_fallback_channel, p_fallback_digest, p_return_url, p_step3_channel, p_step3_digest)
    RETURNING * INTO created;
    INSERT INTO create_events (verification_id, created_at, account_id, channel, destination_key, prefix_key,
                               country, client_key, exact_key)
    VALUES (p_id, created.created_at, p_account_id, p_channel, p_destination_key, p_prefix_key, p_country,
            p_client_key, p_exact_key);
    IF p_fallback_channel IS NOT NULL THEN  -- the fallback destination counts too
        INSERT INTO create_events (verification_id, created_at, account_id, channel, destination_key, prefix_key,
                                   country, client_key, role, exact_key)
        VALUES (p_id, created.created_at, p_account_id, p_fallback_channel, p_fallback_destination_key,
                p_fallback_prefix_key, p_fallback_country, NULL, 'fallback', p_fallback_exact_key);
    END IF;
    IF p_step3_channel IS NOT NULL THEN  -- and the third step's
        INSERT INTO create_events (verification_id, created_at, account_id, channel, destination_key, prefix_key,
                                   country, client_key, role, exact_key)
        VALUES (p_id, created.created_at, p_account_id, p_step3_channel, p_step3_destination_key,
                p_step3_prefix_key, p_step3_country, NULL, 'step3', p_step3_exact_key);
    END IF;

    -- A new verification supersedes the account's older pending ones on its channels (any older one
    -- with a step on a channel of one of its steps):
    -- their tokens stop working and their undelivered intents (every channel) are suppressed.
    WITH s AS (
        UPDATE verifications SET status = 'superseded', superseded_by = p_id, updated_at = now()
         WHERE account_id = p_account_id AND status = 'pending' AND id <> p_id
           AND (channel IN (p_channel, p_fallback_channel, p_step3_channel)
                OR fallback_channel IN (p_channel, p_fallback_channel, p_step3_channel)
                OR step3_channel IN (p_channel, p_fallback_channel, p_step3_channel))
        RETURNING id)
    SELECT array_agg(s.id) INTO superseded_ids FROM s;
    IF superseded_ids IS NOT NULL THEN
        PERFORM suppress_undelivered_intents(superseded_ids, 'superseded');
    END IF;

    -- Its message intents, one per step (the outbox's: enqueue_steps): a suppressed destination's
    -- delivery, answered silently, is failed at once, never eligible.
    PERFORM enqueue_steps(created, p_template_version, p_max_attempts,
                          ARRAY[NULL, p_fallback_destination, p_step3_destination],
                          ARRAY[channel_policy(p_fallback_channel, p_fallback_after_seconds),
                                channel_policy(p_fallback_channel, p_fallback_after_seconds),
                                channel_policy(p_step3_channel, p_step3_after_seconds)],
                          ARRAY[p_fallback_after_seconds, p_fallback_after_seconds, p_step3_after_seconds],
                          ARRAY[primary_suppressed, fallback_suppressed, step3_suppressed]);

    RETURN QUERY SELECT 'created'::text, fields, NULL::integer;
END $$;

-- name: create_verification
-- create_verification: create_verification_v2 for callers without a third step (the previous
-- release, while a rolling deploy still runs it): the same create, step 3 absent.
CREATE OR REPLACE FUNCTION create_verification(
    p_scope text, p_key text, p_fingerprint bytea, p_idempotency_ttl interval,
    p_id uuid, p_account_id text, p_channel text, p_destination text, p_purpose text, p_locale text,
    p_template_version text, p_key_id text, p_token_nonce bytea, p_token_digest bytea,
    p_ttl interval, p_max_confirm_failures integer, p_max_attempts integer,
    p_rate_limit integer, p_rate_window interval, p_rate_spacing interval,
    p_destination_key bytea, p_prefix_key bytea, p_country text, p_client_key bytea,
    p_per_account integer, p_per_prefix integer, p_per_country integer, p_per_client integer,
    p_fallback_channel text, p_fallback_destination text, p_fallback_after_seconds integer,
    p_fallback_digest bytea, p_fallback_destination_key bytea, p_fallback_prefix_key bytea,
    p_fallback_country text,
    p_return_url text,
    p_suppression_keys bytea[], p_fallback_suppression_keys bytea[],
    p_alias_suppression_keys bytea[], p_fallback_alias_suppression_keys bytea[],
    p_exact_key bytea, p_fallback_exact_key bytea, p_suppressed_answer text)
RETURNS TABLE (outcome text, verification jsonb, retry_after integer)
LANGUAGE sql AS $$
    SELECT * FROM create_verification_v2(
        p_scope, p_key, p_fingerprint, p_idempotency_ttl, p_id, p_account_id, p_channel, p_destination, p_purpose,
        p_locale, p_template_version, p_key_id, p_token_nonce, p_token_digest, p_ttl, p_max_confirm_failures,
        p_max_attempts, p_rate_limit, p_rate_window, p_rate_spacing, p_destination_key, p_prefix_key, p_country,
        p_client_key, p_per_account, p_per_prefix, p_per_country, p_per_client,
        p_fallback_channel, p_fallback_destination, p_fallback_after_seconds, p_fallback_digest,
        p_fallback_destination_key, p_fallback_prefix_key, p_fallback_country, p_return_url,
        p_suppression_keys, p_fallback_suppression_keys, p_alias_suppression_keys, p_fallback_alias_suppression_keys,
        p_exact_key, p_fallback_exact_key, p_suppressed_answer,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
$$;
