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
                    AND role <> 'fallback'  -- a fallback destination is not another creation
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
