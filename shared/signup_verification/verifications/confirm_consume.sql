-- consume: find and verify in one statement (one round trip, one transaction; issue 18). The
-- verification is found by its digest (the link's under each key of the ring, or the SMS code's the
-- caller matched) paired with the key that row names, so only the right key's digest matches; the
-- UPDATE requires it pending and unexpired, so of two concurrent confirmations exactly one consumes
-- (the other gets its row back with consumed_at NULL and reads the state again).
-- :id is NULL for a link (email only) or the SMS verification's id.
-- Undelivered intents of the now verified verification are suppressed in the same statement
-- (nothing left to send), through the shared transition (sql/definitions/03_suppress_undelivered_intents.sql).
-- The digest probe is the same whatever the arguments (token_digest's unique index), so the plan
-- is generic-safe: the custom plan buys nothing.
WITH candidate AS (
    SELECT v.id, v.account_id, v.channel, v.destination, v.locale, v.key_id, v.token_digest, v.status,
           v.expires_at, v.verified_at, v.confirm_failures, v.max_confirm_failures, now() AS db_now
      FROM verifications AS v
      JOIN unnest(CAST(:key_ids AS text[]), CAST(:digests AS bytea[])) AS k(key_id, digest)
        ON k.key_id = v.key_id AND k.digest = v.token_digest
     WHERE v.token_digest = ANY (CAST(:digests AS bytea[]))
       AND (v.id = CAST(:id AS uuid) OR (CAST(:id AS uuid) IS NULL AND v.channel = 'email'))
     LIMIT 1
), consumed AS (
    UPDATE verifications AS v
       SET status = 'verified', verified_at = now(), updated_at = now()
      FROM candidate AS c
     WHERE v.id = c.id AND v.status = 'pending' AND v.expires_at > now()
    RETURNING v.id, v.verified_at
)
SELECT c.*, k.verified_at AS consumed_at,
       (SELECT count(*) FROM consumed AS s, LATERAL suppress_undelivered_intents(ARRAY[s.id], 'verified')) AS suppressed
  FROM candidate AS c
  LEFT JOIN consumed AS k ON k.id = c.id
