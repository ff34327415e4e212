-- What a failure for good sets off beyond its delivery (outbox/failure_policy.py), called by the
-- statement that records the failure so both commit together.
--
-- suppress_destinations: the exact destinations of failed deliveries whose fault was the
-- recipient's go on the suppression list (create refuses them: sql/definitions/14). p_failures is a
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
