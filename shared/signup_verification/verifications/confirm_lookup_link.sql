-- Candidates for an email link: its keyed digest under each key of the ring (rotation order).
-- token_digest is UNIQUE, so at most one row per key; Python then compares in constant time.
SELECT id, account_id, channel, destination, locale, key_id, token_digest, status, expires_at, verified_at,
       confirm_failures, max_confirm_failures, now() AS db_now,
       return_url  -- issue 12: the pages' way back to the site
  FROM verifications
 WHERE token_digest = ANY (CAST(:digests AS bytea[])) AND channel = 'email'
