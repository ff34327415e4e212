-- One verification's state, read in a fresh statement (so it sees every commit before it).
SELECT id, account_id, channel, destination, locale, key_id, token_digest, status, expires_at, verified_at,
       confirm_failures, max_confirm_failures, now() AS db_now,
       return_url  -- issue 12: the pages' way back to the site
  FROM verifications
 WHERE id = :id
