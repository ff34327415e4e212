-- The destinations create refuses, and the faults that put them there: one file of the verifications
-- package's functions and views (platform/catalogue.py; applied by platform/migrations.py in file-name
-- order).

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
