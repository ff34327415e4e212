-- destination_suppression: why create must refuse this destination, or NULL. A destination whose
-- delivery failed for the recipient's fault (a hard bounce, an invalid or unsubscribed number, a
-- spam report) is on destination_suppressions under the keyed digest of its exact address
-- (key_kind 'exact': verifications/abuse.py exact_email; never the alias-folded rate-limit key, so
-- a bounce of 'victim+x@gmail.com' never refuses 'victim@gmail.com'), until an operator clears it
-- (`verifyctl suppression clear`) or its expires_at passes (SUPPRESSION_DAYS; NULL: no expiry).
-- Entries from before exact keys (key_kind 'alias', sql/017) match on the alias key until they expire.
-- p_exact_keys / p_alias_keys: the digests under every key of the token ring (abuse.py
-- destination_keys), so an entry written before a key rotation still matches.
DROP FUNCTION IF EXISTS destination_suppression(text, bytea);
DROP FUNCTION IF EXISTS destination_suppression(text, bytea[]);
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
