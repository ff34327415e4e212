-- The whole create path in one round trip: one file of the verifications package's functions and views
-- (platform/catalogue.py; applied by platform/migrations.py in file-name order).

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
