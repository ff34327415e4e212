-- Candidates for an email link: its keyed digest under each key of the ring (rotation order).
-- token_digest and fallback_digest are UNIQUE, so at most one row per key; Python then compares in
-- constant time. issue 14: the email may be the fallback channel (link_digest = its digest then).
SELECT id, account_id, channel, destination, locale, key_id, token_digest, status, expires_at, verified_at,
       confirm_failures, max_confirm_failures, now() AS db_now,
       fallback_channel, fallback_digest,
       (SELECT i.destination FROM delivery_intents AS i
         WHERE i.verification_id = verifications.id AND i.channel = verifications.fallback_channel
           AND i.event_type IS NULL) AS fallback_destination,
       return_url  -- issue 12: the pages' way back to the site
  FROM verifications
 WHERE (token_digest = ANY (CAST(:digests AS bytea[])) AND channel = 'email')
    OR (fallback_digest = ANY (CAST(:digests AS bytea[])) AND fallback_channel = 'email')
