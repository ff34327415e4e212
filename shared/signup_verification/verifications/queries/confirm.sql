-- Confirmation by link or code (verifications/confirm.py, entry.py): one file of the verifications
-- package's named statements (platform/catalogue.py).

-- name: confirm_state
-- One verification's state, read in a fresh statement (so it sees every commit before it), with its
-- later steps' channels, digests and destinations (a secret may be any step's) and its proofs.
-- `sent_channels`: the steps whose message may have reached the person, the only ones whose code may
-- prove (confirm.py says why); `ended_unsent_channels`: the steps whose intent ended without its
-- message ever reaching the provider, whose code nobody holds or ever will (step_sends defines both;
-- the read statement reads them alike). On the unique index by verification, in this statement: no
-- round trip of its own.
SELECT id, account_id, channel, destination, locale, key_id, token_digest, status, expires_at, verified_at,
       confirm_failures, max_confirm_failures, now() AS db_now, steps.sent_channels, steps.ended_unsent_channels,
       fallback_channel, fallback_digest,
       (SELECT i.destination FROM delivery_intents AS i
         WHERE i.verification_id = verifications.id AND i.channel = verifications.fallback_channel
           AND i.event_type IS NULL) AS fallback_destination,
       step3_channel, step3_digest,
       (SELECT i.destination FROM delivery_intents AS i
         WHERE i.verification_id = verifications.id AND i.channel = verifications.step3_channel
           AND i.event_type IS NULL) AS step3_destination,
       return_url, verified_channel, verified_via, second_proof_at, second_proof_channel, third_proof_at
  FROM verifications
 CROSS JOIN LATERAL (
     SELECT coalesce(array_agg(s.channel) FILTER (WHERE s.may_have_reached), '{}') AS sent_channels,
            coalesce(array_agg(s.channel) FILTER (WHERE s.ended_unsent), '{}') AS ended_unsent_channels
       FROM step_sends AS s
      WHERE s.verification_id = verifications.id) AS steps
 WHERE id = :id

-- name: confirm_link
-- confirm a link: find and record its proof in one statement (one round trip, one transaction).
-- Keep the consume part in step with confirm_consume (the SMS path), which does the same UPDATE
-- for a code. The row is the link's verification (:id: the link names it), and it is consumed only
-- where the token's keyed digest
-- under the key the row names (:key_ids / :digests, pairwise: the digest under each key of the ring)
-- is its email digest (the email may be any step's channel). The link proves the address once:
-- - the first proof: a pending, unexpired verification becomes verified, its proof `verified_channel`
--   'email', `verified_via` 'link'; its undelivered intents (both channels) are suppressed in the same
--   statement through the shared transition (suppress_undelivered_intents), and
--   the `verification.verified` webhook event is recorded (record_event);
-- - a later proof: a verification another step's code verified, still unexpired, whose link has not
--   proved the address yet: `second_proof_at` / `second_proof_channel`, or `third_proof_at` when
--   another step proved second (verifications/queries/confirm.sql:confirm_consume writes them alike).
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
           step3_channel, step3_digest,
           (SELECT i.destination FROM delivery_intents AS i
             WHERE i.verification_id = verifications.id AND i.channel = verifications.step3_channel
               AND i.event_type IS NULL) AS step3_destination,
           return_url, verified_channel, verified_via, second_proof_at, second_proof_channel, third_proof_at,
           CASE 'email' WHEN channel THEN token_digest WHEN fallback_channel THEN fallback_digest
                        ELSE step3_digest END AS email_digest
      FROM verifications
     WHERE id = :id AND 'email' IN (channel, fallback_channel, step3_channel)
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
           -- a concurrent first proof may commit a verified_at later than this transaction's now()
           second_proof_at = CASE WHEN v.status <> 'verified' THEN NULL WHEN v.second_proof_at IS NULL
                                  THEN greatest(now(), v.verified_at) ELSE v.second_proof_at END,
           second_proof_channel = CASE WHEN v.status <> 'verified' THEN NULL WHEN v.second_proof_at IS NULL
                                       THEN 'email' ELSE v.second_proof_channel END,
           third_proof_at = CASE WHEN v.status = 'verified' AND v.second_proof_at IS NOT NULL
                                 THEN greatest(now(), v.second_proof_at) END,
           updated_at = now()
     WHERE v.id = (SELECT c.id FROM candidate AS c) AND v.expires_at > now()
       AND (v.status NOT IN ('verified', 'expired', 'superseded', 'locked')
            -- a later proof: verified by another step's secret, and this one not proved yet (a row
            -- from before second_proof_channel with a second proof has no step left to prove)
            OR (v.status = 'verified' AND v.verified_channel <> 'email' AND v.third_proof_at IS NULL
                AND (v.second_proof_at IS NULL OR v.second_proof_channel <> 'email')))
    RETURNING v.id, v.verified_at, v.verified_channel, v.verified_via, v.second_proof_at, v.second_proof_channel,
              v.third_proof_at, v AS verification
)
SELECT c.*, k.id IS NOT NULL AS consumed, k.verified_at AS new_verified_at, k.verified_channel AS new_verified_channel,
       k.verified_via AS new_verified_via, k.second_proof_at AS new_second_proof_at,
       k.second_proof_channel AS new_second_proof_channel, k.third_proof_at AS new_third_proof_at,
       (SELECT count(*) FROM (SELECT id FROM consumed WHERE second_proof_at IS NULL) AS s,
               LATERAL suppress_undelivered_intents(ARRAY[s.id], 'verified')) AS suppressed,
       (SELECT CASE WHEN s.second_proof_at IS NULL THEN record_event(s.verification, 'verification.verified') ELSE 0 END
               + record_event(s.verification, 'verification.proved',
                              jsonb_build_object('proof', jsonb_build_object(
                                  'channel', 'email', 'via', 'link',
                                  'at', rfc3339(coalesce(s.third_proof_at, s.second_proof_at, s.verified_at)))),
                              'email')
          FROM consumed AS s) AS events
  FROM candidate AS c
  LEFT JOIN consumed AS k ON k.id = c.id

-- name: confirm_consume
-- consume: the one atomic UPDATE that records a code's proof (a link's is verifications/queries/confirm.sql:confirm_link, which finds
-- and consumes in one statement: keep the two in step). A code is the secret of one step's code
-- channel (:channel, whichever step it is: the caller matched :digest with that step's digest), and
-- proves that step's number once, in one of two ways:
-- - the first proof: a pending, unexpired verification becomes verified, its proof `verified_channel`
--   :channel, `verified_via` 'code'. Its undelivered intents are suppressed in the same statement, through
--   the shared transition (suppress_undelivered_intents), every other step's
--   too ('verified': a later step proved before its time is never sent), and the
--   `verification.verified` webhook event is recorded (record_event);
-- - a later proof: a verification another step's secret verified, still unexpired, whose code has
--   not proved its number yet and has wrong tries left: `second_proof_at` / `second_proof_channel`,
--   or `third_proof_at` when another step proved second. Nothing is left to suppress.
-- Either way the `verification.proved` event is recorded, its subject the channel proved. The UPDATE
-- requires the digest the caller matched and one of those two states, so of two concurrent
-- confirmations with this code exactly one returns a row.
WITH consumed AS (
    UPDATE verifications AS v
       SET status = 'verified',
           verified_at = CASE WHEN v.status = 'verified' THEN v.verified_at ELSE now() END,
           verified_channel = CASE WHEN v.status = 'verified' THEN v.verified_channel ELSE CAST(:channel AS text) END,
           verified_via = CASE WHEN v.status = 'verified' THEN v.verified_via ELSE 'code' END,
           -- a concurrent first proof may commit a verified_at later than this transaction's now()
           second_proof_at = CASE WHEN v.status <> 'verified' THEN NULL WHEN v.second_proof_at IS NULL
                                  THEN greatest(now(), v.verified_at) ELSE v.second_proof_at END,
           second_proof_channel = CASE WHEN v.status <> 'verified' THEN NULL WHEN v.second_proof_at IS NULL
                                       THEN CAST(:channel AS text) ELSE v.second_proof_channel END,
           third_proof_at = CASE WHEN v.status = 'verified' AND v.second_proof_at IS NOT NULL
                                 THEN greatest(now(), v.second_proof_at) END,
           updated_at = now()
     WHERE v.id = :id AND v.expires_at > now()
       AND ((v.channel = CAST(:channel AS text) AND v.token_digest = :digest)
            OR (v.fallback_channel = CAST(:channel AS text) AND v.fallback_digest = :digest)
            OR (v.step3_channel = CAST(:channel AS text) AND v.step3_digest = :digest))
       -- pending, written so it implies no partial index (verifications/queries/confirm.sql:confirm_link says why), or the later proof
       AND (v.status NOT IN ('verified', 'expired', 'superseded', 'locked')
            OR (v.status = 'verified' AND v.verified_channel <> CAST(:channel AS text) AND v.third_proof_at IS NULL
                AND (v.second_proof_at IS NULL OR v.second_proof_channel <> CAST(:channel AS text))
                AND v.confirm_failures < v.max_confirm_failures))
    RETURNING v.id, v.account_id, v.verified_at, v.verified_channel, v.verified_via, v.second_proof_at,
              v.second_proof_channel, v.third_proof_at, v AS verification
)
SELECT c.id, c.account_id, c.verified_at, c.verified_channel, c.verified_via, c.second_proof_at,
       c.second_proof_channel, c.third_proof_at,
       CASE WHEN c.second_proof_at IS NULL
            THEN (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[c.id], 'verified')) ELSE 0 END AS suppressed,
       CASE WHEN c.second_proof_at IS NULL THEN record_event(c.verification, 'verification.verified') ELSE 0 END
       + record_event(c.verification, 'verification.proved',
                      jsonb_build_object('proof', jsonb_build_object(
                          'channel', CAST(:channel AS text), 'via', 'code',
                          'at', rfc3339(coalesce(c.third_proof_at, c.second_proof_at, c.verified_at)))),
                      CAST(:channel AS text)) AS events
  FROM consumed AS c

-- name: confirm_wrong_code
-- A wrong code (:code_channels: the channels that carry one, at any step): counted atomically, whatever the verification's state, so guessing against a
-- finished verification costs the same budgets (its own count, and the destination's daily budget,
-- which sums these counts: verifications/queries/confirm.sql:confirm_destination_failures). Only a pending, unexpired verification
-- changes state: the attempt that reaches the limit locks it, suppresses what it had left to send
-- (every channel) and records the `verification.locked` webhook event (record_event); both
-- are no-ops for a verification locked before.
WITH failed AS (
    UPDATE verifications
       SET confirm_failures = confirm_failures + 1,
           status = CASE WHEN status NOT IN ('verified', 'expired', 'superseded', 'locked') AND expires_at > now()
                              AND confirm_failures + 1 >= max_confirm_failures
                         THEN 'locked' ELSE status END,
           updated_at = now()
     WHERE id = :id AND (channel = ANY (CAST(:code_channels AS text[])) OR fallback_channel = ANY (CAST(:code_channels AS text[]))
                         OR step3_channel = ANY (CAST(:code_channels AS text[])))
    RETURNING id, status, confirm_failures, max_confirm_failures, verifications AS verification
)
SELECT f.id, f.status, f.confirm_failures, f.max_confirm_failures,
       CASE WHEN f.status = 'locked'
            THEN (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[f.id], 'locked')) ELSE 0 END
           AS suppressed,
       CASE WHEN f.status = 'locked' THEN record_event(f.verification, 'verification.locked') ELSE 0 END AS events
  FROM failed AS f

-- name: confirm_destination_failures
-- Wrong codes typed in the last day against every verification of this one's destination
-- (the per-verification allowance resets with each new verification). The
-- destination is matched on create_events' keyed digest, on its (channel, destination_key, created_at) index.
-- A number's wrong codes count together whichever code channel (:code_channels) carried them: every
-- phone channel's destination key is the number's (verifications/abuse.py), so switching channels
-- buys no more guesses. Each verification counts once, however many of its rows match.
SELECT coalesce(sum(v.confirm_failures), 0)::int AS failures
  FROM verifications AS v
 WHERE v.id IN (SELECT e.verification_id
                  FROM create_events AS mine
                  JOIN create_events AS e
                    ON e.channel = ANY (CAST(:code_channels AS text[]))
                   AND e.destination_key = mine.destination_key
                   AND e.created_at > now() - interval '1 day'
                 WHERE mine.verification_id = :id
                   AND mine.channel = ANY (CAST(:code_channels AS text[])))  -- its code channels' rows

-- name: confirm_lock_destination
-- The destination is over its daily wrong-code budget: the answer is `locked`, so
-- the verification becomes locked for real, with what that means everywhere else: its undelivered
-- intents suppressed and the `verification.locked` webhook event recorded (record_event), in
-- this statement. Only a pending, unexpired verification locks; its failure count is left as it is
-- (no code of its own was tried).
WITH locked AS (
    UPDATE verifications SET status = 'locked', updated_at = now()
     WHERE id = :id AND expires_at > now()
       AND status NOT IN ('verified', 'expired', 'superseded', 'locked')  -- pending (verifications/queries/confirm.sql:confirm_link: why so)
    RETURNING id, verifications AS verification
)
SELECT l.id,
       (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[l.id], 'locked')) AS suppressed,
       record_event(l.verification, 'verification.locked') AS events
  FROM locked AS l
