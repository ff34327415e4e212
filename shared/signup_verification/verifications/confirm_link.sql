-- confirm a link: find and verify in one statement (one round trip, one transaction).
-- Keep the consume part in step with confirm_consume.sql (the SMS path), which does the same UPDATE
-- for a code. The row is the link's verification (:id, sql/016: the link names it; an old-style link's
-- id comes from confirm_link_legacy.sql first), and it is consumed only where the token's keyed digest
-- under the key the row names (:key_ids / :digests, pairwise: the digest under each key of the ring)
-- is its email digest (the email may be the fallback channel). The UPDATE requires it pending and
-- unexpired, so of two concurrent confirmations exactly one consumes; the other gets the row with
-- consumed_at NULL. The proof recorded: `verified_channel` 'email', `verified_via` 'link'.
-- Undelivered intents of the now verified verification (both channels) are suppressed in the same
-- statement, through the shared transition (sql/definitions/03_suppress_undelivered_intents.sql); the
-- `verification.verified` webhook event is recorded (sql/definitions/10_record_event.sql).
WITH found AS (
    SELECT id, account_id, channel, destination, locale, key_id, token_digest, status, expires_at, verified_at,
           confirm_failures, max_confirm_failures, now() AS db_now,
           fallback_channel, fallback_digest,
           (SELECT i.destination FROM delivery_intents AS i
             WHERE i.verification_id = verifications.id AND i.channel = verifications.fallback_channel
               AND i.event_type IS NULL) AS fallback_destination,
           return_url, verified_channel, verified_via,
           CASE WHEN channel = 'email' THEN token_digest ELSE fallback_digest END AS email_digest
      FROM verifications
     WHERE id = :id AND 'email' IN (channel, fallback_channel)
), candidate AS (
    SELECT f.* FROM found AS f
      JOIN unnest(CAST(:key_ids AS text[]), CAST(:digests AS bytea[])) AS k(key_id, digest)
        ON k.key_id = f.key_id AND k.digest = f.email_digest
     LIMIT 1
), consumed AS (
    -- By primary key, whatever the statistics say: `status = 'pending'` would let the planner walk a
    -- pending partial index filtering by id (its pick whenever the last ANALYZE saw few pending rows),
    -- which costs the whole pending set per confirmation. Not one of the four dead states is the same
    -- condition (the status CHECK constraint) and implies no partial index.
    UPDATE verifications AS v
       SET status = 'verified', verified_at = now(), verified_channel = 'email', verified_via = 'link',
           updated_at = now()
     WHERE v.id = (SELECT c.id FROM candidate AS c)
       AND v.status NOT IN ('verified', 'expired', 'superseded', 'locked') AND v.expires_at > now()
    RETURNING v.id, v.verified_at, v AS verification
)
SELECT c.*, k.verified_at AS consumed_at,
       (SELECT count(*) FROM consumed AS s, LATERAL suppress_undelivered_intents(ARRAY[s.id], 'verified')) AS suppressed,
       (SELECT record_event(s.verification, 'verification.verified') FROM consumed AS s) AS events
  FROM candidate AS c
  LEFT JOIN consumed AS k ON k.id = c.id
