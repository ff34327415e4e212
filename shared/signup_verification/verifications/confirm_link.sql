-- confirm a link: find and record its proof in one statement (one round trip, one transaction).
-- Keep the consume part in step with confirm_consume.sql (the SMS path), which does the same UPDATE
-- for a code. The row is the link's verification (:id, sql/016: the link names it; an old-style link's
-- id comes from confirm_link_legacy.sql first), and it is consumed only where the token's keyed digest
-- under the key the row names (:key_ids / :digests, pairwise: the digest under each key of the ring)
-- is its email digest (the email may be the fallback channel). The link proves the address once:
-- - the first proof: a pending, unexpired verification becomes verified, its proof `verified_channel`
--   'email', `verified_via` 'link'; its undelivered intents (both channels) are suppressed in the same
--   statement through the shared transition (sql/definitions/03_suppress_undelivered_intents.sql), and
--   the `verification.verified` webhook event is recorded (sql/definitions/10_record_event.sql);
-- - a later proof (sql/027): a verification its SMS code verified, still unexpired, whose link has not
--   proved the address yet: `second_proof_at`.
-- Either way the `verification.proved` event is recorded, its subject the channel proved. Of two
-- concurrent confirmations exactly one consumes; the other gets the row with `consumed` false. The
-- answer is the row as the statement found it, and the proof columns as it left them (`new_*`).
WITH found AS (
    SELECT id, account_id, channel, destination, locale, key_id, token_digest, status, expires_at, verified_at,
           confirm_failures, max_confirm_failures, now() AS db_now,
           fallback_channel, fallback_digest,
           (SELECT i.destination FROM delivery_intents AS i
             WHERE i.verification_id = verifications.id AND i.channel = verifications.fallback_channel
               AND i.event_type IS NULL) AS fallback_destination,
           return_url, verified_channel, verified_via, second_proof_at,
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
    -- condition (the status CHECK constraint) and implies no partial index; nor does the later proof's.
    UPDATE verifications AS v
       SET status = 'verified',
           verified_at = CASE WHEN v.status = 'verified' THEN v.verified_at ELSE now() END,
           verified_channel = CASE WHEN v.status = 'verified' THEN v.verified_channel ELSE 'email' END,
           verified_via = CASE WHEN v.status = 'verified' THEN v.verified_via ELSE 'link' END,
           second_proof_at = CASE WHEN v.status = 'verified' THEN now() END,
           updated_at = now()
     WHERE v.id = (SELECT c.id FROM candidate AS c) AND v.expires_at > now()
       AND (v.status NOT IN ('verified', 'expired', 'superseded', 'locked')
            OR (v.status = 'verified' AND v.verified_channel = 'sms' AND v.second_proof_at IS NULL))
    RETURNING v.id, v.verified_at, v.verified_channel, v.verified_via, v.second_proof_at, v AS verification
)
SELECT c.*, k.id IS NOT NULL AS consumed, k.verified_at AS new_verified_at, k.verified_channel AS new_verified_channel,
       k.verified_via AS new_verified_via, k.second_proof_at AS new_second_proof_at,
       (SELECT count(*) FROM (SELECT id FROM consumed WHERE second_proof_at IS NULL) AS s,
               LATERAL suppress_undelivered_intents(ARRAY[s.id], 'verified')) AS suppressed,
       (SELECT CASE WHEN s.second_proof_at IS NULL THEN record_event(s.verification, 'verification.verified') ELSE 0 END
               + record_event(s.verification, 'verification.proved',
                              jsonb_build_object('proof', jsonb_build_object(
                                  'channel', 'email', 'via', 'link',
                                  'at', rfc3339(coalesce(s.second_proof_at, s.verified_at)))),
                              'email')
          FROM consumed AS s) AS events
  FROM candidate AS c
  LEFT JOIN consumed AS k ON k.id = c.id
