-- The verification an email link names (sql/016; an old-style link's id comes from
-- confirm_link_legacy.sql first), for the link's page: reads only. Python compares the token's keyed
-- digest with the row's in constant time. issue 14: the email may be the fallback channel.
SELECT id, account_id, channel, destination, locale, key_id, token_digest, status, expires_at, verified_at,
       confirm_failures, max_confirm_failures, now() AS db_now,
       fallback_channel, fallback_digest,
       (SELECT i.destination FROM delivery_intents AS i
         WHERE i.verification_id = verifications.id AND i.channel = verifications.fallback_channel
           AND i.event_type IS NULL) AS fallback_destination,
       return_url  -- issue 12: the pages' way back to the site
  FROM verifications
 WHERE id = :id AND 'email' IN (channel, fallback_channel)
