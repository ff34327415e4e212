-- create_verification: the whole create path in one round trip and one transaction.
--   outcome 'created'      -> the idempotency record, verification and intent were written;
--                             verification = the created verification's fields (ISO timestamps)
--   outcome 'replayed'     -> the first request with this key was created; verification = its fields
--   outcome 'mismatch'     -> the key was used with a different request
--   outcome 'rate_limited' -> nothing kept (so the same key may be retried later); retry_after in s
-- Outcomes only: the HTTP edge (api/create.py) decides statuses and bodies, also for replays.
-- A concurrent request with the same key blocks on the key's unique index until the first
-- commits, then replays it: callers never see 409 for an in-flight key.
-- Changing the arguments or the result type needs `DROP FUNCTION IF EXISTS <old signature>;` first.
CREATE OR REPLACE FUNCTION create_verification(
    p_scope text, p_key text, p_fingerprint bytea, p_idempotency_ttl interval,
    p_id uuid, p_account_id text, p_channel text, p_destination text, p_purpose text, p_locale text,
    p_template_version text, p_key_id text, p_token_nonce bytea, p_token_digest bytea,
    p_ttl interval, p_max_confirm_failures integer, p_max_attempts integer,
    p_rate_limit integer, p_rate_window interval, p_rate_spacing interval)
RETURNS TABLE (outcome text, verification jsonb, retry_after integer)
LANGUAGE plpgsql AS $$
DECLARE
    existing idempotency_keys%ROWTYPE;
    recent_count integer;
    newest_recent timestamptz;
    limit_frees_at timestamptz;
    wait_seconds integer := 0;
    created verifications%ROWTYPE;
    fields jsonb;
    superseded_ids uuid[];
BEGIN
    LOOP
        INSERT INTO idempotency_keys (scope, key, fingerprint, expires_at)
        VALUES (p_scope, p_key, p_fingerprint, now() + p_idempotency_ttl)
        ON CONFLICT (scope, key) DO NOTHING;
        EXIT WHEN FOUND;
        -- FOR UPDATE: two requests reusing one expired key queue here, and the second then sees
        -- the record the first wrote instead of overwriting it (which would create twice).
        SELECT * INTO existing FROM idempotency_keys WHERE scope = p_scope AND key = p_key FOR UPDATE;
        CONTINUE WHEN NOT FOUND;  -- deleted (reaped, or rate limited) since the INSERT: insert again
        IF existing.expires_at <= now() THEN
            -- An expired key the reconciler has not reaped yet counts as unused.
            UPDATE idempotency_keys SET fingerprint = p_fingerprint, outcome = NULL,
                   outcome_data = NULL, created_at = now(), expires_at = now() + p_idempotency_ttl
             WHERE scope = p_scope AND key = p_key;
            EXIT;
        END IF;
        IF existing.fingerprint <> p_fingerprint THEN
            RETURN QUERY SELECT 'mismatch'::text, NULL::jsonb, NULL::integer;
        ELSE
            -- Only a 'created' outcome is ever stored (the others keep no record).
            RETURN QUERY SELECT 'replayed'::text, existing.outcome_data, NULL::integer;
        END IF;
        RETURN;
    END LOOP;

    -- Serialise creations per destination, so the rate limit cannot be raced, then per account and
    -- channel, so the supersede below sees a concurrent create of the same account (its snapshot
    -- would miss an uncommitted one and leave two pending). Always in this order: no deadlock.
    -- lower(): 'Ada@x' and 'ADA@x' reach one inbox and share one limit.
    PERFORM pg_advisory_xact_lock(hashtextextended('destination:' || p_channel || ':' || lower(p_destination), 0));
    PERFORM pg_advisory_xact_lock(hashtextextended('account:' || p_channel || ':' || p_account_id, 0));
    SELECT count(*), max(created_at) INTO recent_count, newest_recent
      FROM verifications
     WHERE channel = p_channel AND destination IS NOT NULL AND lower(destination) = lower(p_destination)
       AND created_at > now() - p_rate_window;
    IF recent_count >= p_rate_limit THEN
        -- The limit frees up when the creation that filled it leaves the window.
        SELECT created_at + p_rate_window INTO limit_frees_at
          FROM verifications
         WHERE channel = p_channel AND destination IS NOT NULL AND lower(destination) = lower(p_destination)
           AND created_at > now() - p_rate_window
         ORDER BY created_at DESC OFFSET p_rate_limit - 1 LIMIT 1;
        wait_seconds := ceil(extract(epoch FROM limit_frees_at - now()));
    END IF;
    IF newest_recent > now() - p_rate_spacing THEN
        wait_seconds := greatest(wait_seconds, ceil(extract(epoch FROM newest_recent + p_rate_spacing - now())));
    END IF;
    IF wait_seconds > 0 THEN
        -- Not stored against the key: the same request may be retried once the wait is over.
        DELETE FROM idempotency_keys WHERE scope = p_scope AND key = p_key;
        RETURN QUERY SELECT 'rate_limited'::text, NULL::jsonb, wait_seconds;
        RETURN;
    END IF;

    INSERT INTO verifications (id, account_id, channel, destination, purpose, locale, key_id,
                               token_nonce, token_digest, expires_at, max_confirm_failures)
    VALUES (p_id, p_account_id, p_channel, p_destination, p_purpose, p_locale, p_key_id,
            p_token_nonce, p_token_digest, now() + p_ttl, p_max_confirm_failures)
    RETURNING * INTO created;

    -- A new verification supersedes the account's older pending ones on this channel:
    -- their tokens stop working and their undelivered intents are suppressed.
    WITH s AS (
        UPDATE verifications SET status = 'superseded', superseded_by = p_id, updated_at = now()
         WHERE account_id = p_account_id AND channel = p_channel AND status = 'pending' AND id <> p_id
        RETURNING id)
    SELECT array_agg(s.id) INTO superseded_ids FROM s;
    IF superseded_ids IS NOT NULL THEN
        PERFORM suppress_undelivered_intents(superseded_ids, 'superseded');
    END IF;

    INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, max_attempts)
    VALUES (p_id, p_channel, p_purpose, p_locale, p_template_version, p_max_attempts);

    fields := jsonb_build_object(
        'verification_id', created.id,
        'account_id', created.account_id,
        'channel', created.channel,
        'status', created.status,
        'expires_at', to_char(created.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'created_at', to_char(created.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
    UPDATE idempotency_keys SET outcome = 'created', outcome_data = fields
     WHERE scope = p_scope AND key = p_key;
    RETURN QUERY SELECT 'created'::text, fields, NULL::integer;
END $$;
