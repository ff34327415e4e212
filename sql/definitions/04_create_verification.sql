-- create_verification: the whole create path in one round trip and one transaction.
--   outcome 'created'      -> the idempotency record, verification and intent were written;
--                             verification = the created verification's fields (ISO timestamps)
--   outcome 'replayed'     -> the first request with this key was created; verification = its fields
--   outcome 'mismatch'     -> the key was used with a different request
--   outcome 'rate_limited' -> nothing kept (so the same key may be retried later) but, when the limit
--                             was not the caller's own, the refusal's count; retry_after in s
--   outcome 'suppressed'   -> the destination (or the fallback's) is on the suppression list and
--                             p_suppressed_answer is 'refuse': nothing kept but the refusal's count
--                             (count_refused_create, sql/definitions/15). With 'silent' the
--                             verification is created and the suppressed destination's delivery is
--                             failed at once (reason `suppressed`), never sent: delivery_failed
--                             brings the fallback forward and records the events.
-- Outcomes only: the HTTP edge (api/create.py) decides statuses and bodies, also for replays.
-- A concurrent request with the same key waits on the key's advisory lock until the first
-- commits, then replays it: callers never see 409 for an in-flight key.
-- Changing the arguments or the result type needs `DROP FUNCTION IF EXISTS <old signature>;` first.
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval);
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval,
    bytea, bytea, text, bytea, integer, integer, integer, integer);
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval,
    bytea, bytea, text, bytea, integer, integer, integer, integer,
    text, text, integer, bytea, bytea, bytea, text);
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval,
    bytea, bytea, text, bytea, integer, integer, integer, integer,
    text, text, integer, bytea, bytea, bytea, text, text);
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval,
    bytea, bytea, text, bytea, integer, integer, integer, integer,
    text, text, integer, bytea, bytea, bytea, text, text, bytea[], bytea[]);
CREATE OR REPLACE FUNCTION create_verification(
    p_scope text, p_key text, p_fingerprint bytea, p_idempotency_ttl interval,
    p_id uuid, p_account_id text, p_channel text, p_destination text, p_purpose text, p_locale text,
    p_template_version text, p_key_id text, p_token_nonce bytea, p_token_digest bytea,
    p_ttl interval, p_max_confirm_failures integer, p_max_attempts integer,
    p_rate_limit integer, p_rate_window interval, p_rate_spacing interval,
    -- abuse limits (sql/006_abuse.sql): keyed digests computed by verifications/abuse.py
    p_destination_key bytea, p_prefix_key bytea, p_country text, p_client_key bytea,
    p_per_account integer, p_per_prefix integer, p_per_country integer, p_per_client integer,
    -- channel policy (sql/011_channel_policy.sql): all NULL = no fallback. The fallback's
    -- destination is normalised and policy-checked by the caller, its keys are its own abuse keys.
    p_fallback_channel text, p_fallback_destination text, p_fallback_after_seconds integer,
    p_fallback_digest bytea, p_fallback_destination_key bytea, p_fallback_prefix_key bytea,
    p_fallback_country text,
    -- where the pages send the person back to (checked at the edge, sql/010_return_url.sql)
    p_return_url text,
    -- the suppression list (sql/definitions/14): each destination's exact-address digest and its alias
    -- digest under every key of the ring, so an entry written before a key rotation still matches;
    -- the exact keys create_events keeps (NULL: the same digest as the alias key); refuse | silent
    p_suppression_keys bytea[], p_fallback_suppression_keys bytea[],
    p_alias_suppression_keys bytea[], p_fallback_alias_suppression_keys bytea[],
    p_exact_key bytea, p_fallback_exact_key bytea, p_suppressed_answer text)
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
    policy text := channel_policy(p_fallback_channel, p_fallback_after_seconds);
    fallback_wait integer := 0;
    primary_suppressed boolean;
    fallback_suppressed boolean := false;
    failed_ids bigint[] := '{}';
    failed_reasons jsonb := '[]';
    intent_id bigint;
BEGIN
    -- ---- idempotency record: written complete at insert time -------------------------------------
    -- Everything the 'created' answer holds is known before the verification is written (its id is
    -- the caller's, its times are now() and now() + ttl, its status 'pending'), so the record is
    -- inserted with outcome 'created' and its data, and never updated afterwards. Until this
    -- transaction commits nobody sees it (a concurrent same-key request waits on the unique index);
    -- a rate-limited request deletes it, an error rolls it back.
    -- The answer's shape is sql/definitions/17_created_answer.sql; the record keeps its inputs only.
    fields := created_answer(p_id, p_account_id, p_channel, now(), now() + p_ttl,
                             p_fallback_channel, p_fallback_after_seconds);
    -- One request per key at a time: a concurrent same-key request waits here until this transaction
    -- ends, then reads what it left (the replay, or nothing after a rollback). A lock, not INSERT ...
    -- ON CONFLICT: the speculative insertion wrote a confirmation record to the WAL on every create.
    -- Taken before the destination and account locks below, in every create: no deadlock.
    PERFORM pg_advisory_xact_lock(hashtextextended('idempotency:' || p_scope || ':' || p_key, 0));
    -- FOR UPDATE: the reaper (SKIP LOCKED) leaves an expired record alone while it is taken over.
    SELECT * INTO existing FROM idempotency_keys WHERE scope = p_scope AND key = p_key FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO idempotency_keys (scope, key, fingerprint, expires_at, outcome, verification_id, account_id,
                                      channel, verification_expires_at, fallback_channel, fallback_after_seconds)
        VALUES (p_scope, p_key, p_fingerprint, now() + p_idempotency_ttl, 'created', p_id, p_account_id,
                p_channel, now() + p_ttl, p_fallback_channel, p_fallback_after_seconds);
    ELSIF existing.expires_at <= now() THEN
        -- An expired key the reconciler has not reaped yet counts as unused.
        UPDATE idempotency_keys SET fingerprint = p_fingerprint, outcome = 'created', outcome_data = NULL,
               verification_id = p_id, account_id = p_account_id, channel = p_channel,
               verification_expires_at = now() + p_ttl, fallback_channel = p_fallback_channel,
               fallback_after_seconds = p_fallback_after_seconds,
               created_at = now(), expires_at = now() + p_idempotency_ttl
         WHERE scope = p_scope AND key = p_key;
    ELSIF existing.fingerprint <> p_fingerprint THEN
        RETURN QUERY SELECT 'mismatch'::text, NULL::jsonb, NULL::integer;
        RETURN;
    ELSE
        -- Only a 'created' outcome is ever stored (the others keep no record). Records from before
        -- sql/015 hold the answer itself (outcome_data); newer ones its inputs.
        RETURN QUERY SELECT 'replayed'::text,
               coalesce(existing.outcome_data, created_answer(existing.verification_id, existing.account_id,
                        existing.channel, existing.created_at, existing.verification_expires_at,
                        existing.fallback_channel, existing.fallback_after_seconds)),
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
    -- A fallback's destination is locked too; both in one sorted order (no deadlock).
    PERFORM pg_advisory_xact_lock(d.k) FROM (
        SELECT hashtextextended('destination:' || c || ':' || encode(k, 'hex'), 0) AS k
          FROM (VALUES (p_channel, p_destination_key), (p_fallback_channel, p_fallback_destination_key)) AS t(c, k)
         WHERE k IS NOT NULL ORDER BY 1) AS d;
    PERFORM pg_advisory_xact_lock(hashtextextended('account:' || p_account_id, 0));
    SELECT l.wait_seconds, l.reason INTO wait_seconds, wait_reason FROM create_limit_wait(
        p_channel, p_account_id, p_destination_key, p_prefix_key, p_country, p_client_key,
        p_rate_window, p_rate_spacing, p_rate_limit, p_per_account, p_per_prefix, p_per_country,
        p_per_client) l;
    -- The fallback destination's own limits (destination, prefix, country); the account and client
    -- limits count creations and were checked above.
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

    -- ---- suppression list (sql/definitions/14) -------------------------------------------------
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
    IF (primary_suppressed OR fallback_suppressed) AND coalesce(p_suppressed_answer, 'refuse') <> 'silent' THEN
        DELETE FROM idempotency_keys WHERE scope = p_scope AND key = p_key;
        -- The answer tells whether an address bounced before: each one costs the caller a create of
        -- its account and client limits, so the list cannot be read out faster than they allow.
        PERFORM count_refused_create(p_id, p_account_id, p_channel, p_client_key);
        RETURN QUERY SELECT 'suppressed'::text,
               jsonb_build_object('field', CASE WHEN primary_suppressed THEN 'destination' ELSE 'fallback' END),
               NULL::integer;
        RETURN;
    END IF;
    -- ---- end of suppression list ---------------------------------------------------------------

    INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id,
                               token_nonce, token_digest, expires_at, max_confirm_failures,
                               fallback_channel, fallback_digest, return_url,
                               link_by_digest)  -- old-style links during sql/016's grace day only
    VALUES (p_id, p_account_id, p_channel, p_destination, p_purpose, p_locale, p_key_id,
            p_token_nonce, p_token_digest, now() + p_ttl, p_max_confirm_failures,
            p_fallback_channel, p_fallback_digest,
            p_return_url,
            coalesce((SELECT now() < f.digest_links_until FROM link_format AS f), false))
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

    -- A new verification supersedes the account's older pending ones on its channels (any older one
    -- that used the primary or the fallback channel, as its primary or its fallback):
    -- their tokens stop working and their undelivered intents (every channel) are suppressed.
    WITH s AS (
        UPDATE verifications SET status = 'superseded', superseded_by = p_id, updated_at = now()
         WHERE account_id = p_account_id AND status = 'pending' AND id <> p_id
           AND (channel IN (p_channel, p_fallback_channel) OR fallback_channel IN (p_channel, p_fallback_channel))
        RETURNING id)
    SELECT array_agg(s.id) INTO superseded_ids FROM s;
    IF superseded_ids IS NOT NULL THEN
        PERFORM suppress_undelivered_intents(superseded_ids, 'superseded');
    END IF;

    -- A suppressed destination's delivery (answered silently) is failed at once, never eligible.
    INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, max_attempts,
                                  policy, after_seconds, status, completed_at, failed_at, failure_category,
                                  failure_fault)
    VALUES (p_id, p_channel, p_purpose, p_locale, p_template_version, p_max_attempts,
            policy, p_fallback_after_seconds,
            CASE WHEN primary_suppressed THEN 'failed' ELSE 'ready' END,
            CASE WHEN primary_suppressed THEN now() END, CASE WHEN primary_suppressed THEN now() END,
            CASE WHEN primary_suppressed THEN 'suppressed' END, CASE WHEN primary_suppressed THEN 'recipient' END)
    RETURNING id INTO intent_id;
    IF primary_suppressed THEN
        failed_ids := failed_ids || intent_id;
    END IF;
    -- The fallback, encoded in the record: eligible at created_at + after_seconds (the claim's
    -- eligibility view and the signals ignore it until then), with its own destination.
    IF p_fallback_channel IS NOT NULL THEN
        INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, max_attempts,
                                      role, policy, after_seconds, destination, next_attempt_at, status,
                                      completed_at, failed_at, failure_category, failure_fault)
        VALUES (p_id, p_fallback_channel, p_purpose, p_locale, p_template_version, p_max_attempts,
                'fallback', policy, p_fallback_after_seconds, p_fallback_destination,
                created.created_at + make_interval(secs => p_fallback_after_seconds),
                CASE WHEN fallback_suppressed THEN 'failed' ELSE 'ready' END,
                CASE WHEN fallback_suppressed THEN now() END, CASE WHEN fallback_suppressed THEN now() END,
                CASE WHEN fallback_suppressed THEN 'suppressed' END, CASE WHEN fallback_suppressed THEN 'recipient' END)
        RETURNING id INTO intent_id;
        IF fallback_suppressed THEN
            failed_ids := failed_ids || intent_id;
        END IF;
    END IF;
    IF cardinality(failed_ids) > 0 THEN
        SELECT jsonb_agg(jsonb_build_object('intent_id', f, 'category', 'suppressed', 'fault', 'recipient'))
          INTO failed_reasons FROM unnest(failed_ids) AS f;
        PERFORM delivery_failed(failed_ids, failed_reasons);
    END IF;

    RETURN QUERY SELECT 'created'::text, fields, NULL::integer;
END $$;
