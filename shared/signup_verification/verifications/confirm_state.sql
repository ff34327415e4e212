-- One verification's state, read in a fresh statement (so it sees every commit before it), with its
-- fallback channel's digest and destination (a code may be the fallback's secret) and its proofs.
SELECT id, account_id, channel, destination, locale, key_id, token_digest, status, expires_at, verified_at,
       confirm_failures, max_confirm_failures, now() AS db_now,
       fallback_channel, fallback_digest,
       (SELECT i.destination FROM delivery_intents AS i
         WHERE i.verification_id = verifications.id AND i.channel = verifications.fallback_channel
           AND i.event_type IS NULL) AS fallback_destination,
       return_url, verified_channel, verified_via, second_proof_at
  FROM verifications
 WHERE id = :id
