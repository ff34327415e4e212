-- Channel policy (sql/011_channel_policy.sql): the name create records on the intents.
-- channel_policy: 'single' (no fallback), 'both' (fallback after 0 s: both at once), 'fallback'.
CREATE OR REPLACE FUNCTION channel_policy(p_fallback_channel text, p_after_seconds integer)
RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_fallback_channel IS NULL THEN 'single'
                WHEN p_after_seconds = 0 THEN 'both'
                ELSE 'fallback' END
$$;
