-- destination_suppression: why create must refuse this destination (issue 13), or NULL. A destination
-- a provider reported permanently undeliverable (hard bounce, dropped, Twilio's permanent codes) is on
-- destination_suppressions under the keyed digest of its canonical form (the create_events key, so
-- 'v.ictim+1@googlemail.com' and 'victim@gmail.com' are one entry) until an operator clears it
-- (`verifyctl suppression clear`) or its expires_at passes (SUPPRESSION_DAYS; NULL: no expiry).
-- p_destination_keys: the digest under every key of the token ring (verifications/abuse.py
-- destination_keys), so an entry written before a key rotation still matches.
DROP FUNCTION IF EXISTS destination_suppression(text, bytea);
-- plpgsql, not sql: a scalar sql function with a FROM clause is not inlined, and create_verification
-- then ran it through the SQL-function executor, which plans its query on every call; plpgsql keeps
-- the plan for the session.
CREATE OR REPLACE FUNCTION destination_suppression(p_channel text, p_destination_keys bytea[]) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT s.reason FROM destination_suppressions AS s
             WHERE s.channel = p_channel AND s.destination_key = ANY (p_destination_keys)
               AND (s.expires_at IS NULL OR s.expires_at > now())
             LIMIT 1);
END $$;
