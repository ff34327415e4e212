-- The verifications package's named statements (platform/catalogue.py).

-- name: create
-- One round trip: the whole create (idempotency, rate and abuse limits, the suppression list,
-- supersede, outbox rows) is the SQL function create_verification_v2.
SELECT outcome, verification, retry_after FROM create_verification_v2(
    :scope, :key, :fingerprint, make_interval(secs => :idem_ttl),
    :id, :account_id, :channel, :destination, :purpose, :locale,
    :template_version, :key_id, :nonce, :digest,
    make_interval(secs => :ttl), :max_confirm, :max_attempts,
    :rate_limit, interval '1 hour', make_interval(secs => :spacing),
    :destination_key, :prefix_key, :country, :client_key,
    :per_account, :per_prefix, :per_country, :per_client,
    -- the channel policy: all NULL without a fallback
    :fallback_channel, :fallback_destination, CAST(:fallback_after AS integer), :fallback_digest,
    :fallback_destination_key, :fallback_prefix_key, :fallback_country,
    :return_url,
    -- the suppression list: exact and alias keys under every key of the ring; the exact keys kept
    CAST(:suppression_keys AS bytea[]), CAST(:fallback_suppression_keys AS bytea[]),
    CAST(:alias_suppression_keys AS bytea[]), CAST(:fallback_alias_suppression_keys AS bytea[]),
    CAST(:exact_key AS bytea), CAST(:fallback_exact_key AS bytea), :suppressed_answer,
    -- step 3: all NULL without one
    :step3_channel, :step3_destination, CAST(:step3_after AS integer), CAST(:step3_digest AS bytea),
    CAST(:step3_destination_key AS bytea), CAST(:step3_prefix_key AS bytea), :step3_country,
    CAST(:step3_suppression_keys AS bytea[]), CAST(:step3_alias_suppression_keys AS bytea[]),
    CAST(:step3_exact_key AS bytea))

-- name: read
-- GET /<verification_id> on create_verification (verifications/read.py): the verification as its site
-- may see it, its proofs (verifications/proofs.py: from the verified_* columns and second_proof_at) and
-- its message deliveries (the verification's steps, in order: intents are written in step order), in one statement. Never the nonce, the digest, a token or a code (key_id
-- names the key the code-entry page's handle is made with); the destination is masked in Python. Event intents (role 'event', the webhooks to the site
-- itself) are not deliveries of the message: they never show here. A pending verification past its
-- expiry reads as expired: expires_at is the truth, the status catches up at the reconciler's sweep.
-- A delivery's status is its intent's, told apart where the provider's reports said more:
-- `delivered` (accepted, then reported delivered) and `undeliverable` (accepted, then reported
-- failed for good). Its reason is the recorded verdict (failure_*), or `expired` for a delivery whose
-- link died before it could be sent.
-- The code-entry page's state (verifications/entry.py: `code_entry_url` only while it asks for a
-- code): the stored status and expiry, the tries, and the steps' sends (`sent_channels`,
-- `ended_unsent_channels`) as confirm_state reads them, from the same view (step_sends).
SELECT v.id, v.account_id, v.channel, v.destination, v.return_url, v.key_id, v.fallback_channel, v.step3_channel,
       v.status AS stored_status, v.expires_at AS expires_ts, now() AS db_now, v.confirm_failures,
       v.max_confirm_failures, steps.sent_channels, steps.ended_unsent_channels,
       CASE WHEN v.status = 'pending' AND v.expires_at <= now() THEN 'expired' ELSE v.status END AS status,
       rfc3339(v.created_at) AS created_at, rfc3339(v.expires_at) AS expires_at,
       rfc3339(v.verified_at) AS verified_at, v.verified_channel, v.verified_via,
       rfc3339(v.second_proof_at) AS second_proof_at, v.second_proof_channel,
       rfc3339(v.third_proof_at) AS third_proof_at,
       coalesce((
           SELECT jsonb_agg(jsonb_build_object(
                      'channel', i.channel,
                      'role', i.role,
                      -- when the step is due unless proved first (or brought forward): the first at once
                      'after_seconds', CASE WHEN i.role = 'primary' THEN 0 ELSE i.after_seconds END,
                      -- a later step's own destination, masked in Python; a primary's is the verification's
                      'destination', coalesce(i.destination, v.destination),
                      'status', CASE WHEN i.status = 'accepted' AND i.delivered_at IS NOT NULL THEN 'delivered'
                                     WHEN i.status = 'failed' AND i.undeliverable_reason IS NOT NULL THEN 'undeliverable'
                                     ELSE i.status END,
                      'attempts', i.attempts,
                      'last_outcome', (SELECT a.outcome FROM delivery_attempts AS a
                                        WHERE a.intent_id = i.id ORDER BY a.id DESC LIMIT 1),
                      'accepted_at', CASE WHEN i.status = 'accepted'
                                               OR (i.status = 'failed' AND i.undeliverable_reason IS NOT NULL)
                                          THEN rfc3339(i.completed_at) END,
                      'delivered_at', rfc3339(i.delivered_at),
                      'failed_at', CASE WHEN i.status = 'failed' THEN rfc3339(coalesce(i.failed_at, i.completed_at)) END,
                      'reason', CASE WHEN i.status = 'failed'
                                     THEN jsonb_build_object('category', coalesce(i.failure_category, 'unknown'),
                                                             'code', i.failure_code, 'provider', i.failure_provider,
                                                             'fault', coalesce(i.failure_fault, 'transient_or_unknown'))
                                     WHEN i.status = 'suppressed' AND i.suppression_reason IN ('expired', 'redacted')
                                     THEN jsonb_build_object('category', 'expired', 'code', NULL, 'provider', NULL,
                                                             'fault', 'transient_or_unknown') END)
                      ORDER BY i.id)
             FROM delivery_intents AS i
            WHERE i.verification_id = v.id AND i.role <> 'event'), '[]'::jsonb) AS deliveries
  FROM verifications AS v
 CROSS JOIN LATERAL (
     SELECT coalesce(array_agg(s.channel) FILTER (WHERE s.may_have_reached), '{}') AS sent_channels,
            coalesce(array_agg(s.channel) FILTER (WHERE s.ended_unsent), '{}') AS ended_unsent_channels
       FROM step_sends AS s
      WHERE s.verification_id = v.id) AS steps
 WHERE v.id = :id

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
--   another step proved second (verifications/queries.sql:confirm_consume writes them alike).
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
-- consume: the one atomic UPDATE that records a code's proof (a link's is verifications/queries.sql:confirm_link, which finds
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
       -- pending, written so it implies no partial index (verifications/queries.sql:confirm_link says why), or the later proof
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
-- which sums these counts: verifications/queries.sql:confirm_destination_failures). Only a pending, unexpired verification
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
       AND status NOT IN ('verified', 'expired', 'superseded', 'locked')  -- pending (verifications/queries.sql:confirm_link: why so)
    RETURNING id, verifications AS verification
)
SELECT l.id,
       (SELECT count(*) FROM suppress_undelivered_intents(ARRAY[l.id], 'locked')) AS suppressed,
       record_event(l.verification, 'verification.locked') AS events
  FROM locked AS l

-- name: suppression_list_entries
-- verifyctl suppression list: the entries that still block create, newest first.
SELECT channel, encode(destination_key, 'hex') AS key, reason, intent_id, created_at, expires_at,
       key_kind AS kind, category
  FROM destination_suppressions
 WHERE expires_at IS NULL OR expires_at > now()
 ORDER BY created_at DESC
 LIMIT :limit

-- name: suppression_list_clear
-- verifyctl suppression clear: the destination may be used again.
DELETE FROM destination_suppressions WHERE channel = :channel AND destination_key = :key RETURNING 1

-- name: suppression_list_clear_key
-- verifyctl suppression clear --key: the channel's entry whose key's hex digits start with :prefix
-- (the list shows the first 12; --json the whole key), removed only when it is the one entry that
-- does. Answers how many matched and how many were removed (0 or 1).
WITH matched AS (
    SELECT destination_key FROM destination_suppressions
     WHERE channel = :channel AND starts_with(encode(destination_key, 'hex'), :prefix)
), removed AS (
    DELETE FROM destination_suppressions
     WHERE channel = :channel AND destination_key IN (SELECT destination_key FROM matched)
       AND (SELECT count(*) FROM matched) = 1
    RETURNING 1
)
SELECT (SELECT count(*) FROM matched) AS matched, (SELECT count(*) FROM removed) AS removed

-- name: reap_idempotency_keys
-- Idempotency keys past their expiry, oldest first, in a bounded batch. SKIP LOCKED: a create that
-- is re-using an expired key holds its row and keeps it (create re-inserts a key reaped under it).
WITH due AS (
    SELECT scope, key FROM idempotency_keys
     WHERE expires_at <= now()
     ORDER BY expires_at
     LIMIT :limit
       FOR UPDATE SKIP LOCKED
)
DELETE FROM idempotency_keys AS k
 USING due
 WHERE k.scope = due.scope AND k.key = due.key
RETURNING k.scope

-- name: reap_refused_creates
-- Refused creates older than a day (well past the limits' one-hour window, verifications/queries.sql:create),
-- oldest first, in a bounded batch, on the partial index create_events_refused.
WITH due AS (
    SELECT verification_id FROM create_events
     WHERE role = 'refused' AND created_at < now() - interval '1 day'
     ORDER BY created_at
     LIMIT :limit
)
DELETE FROM create_events AS e
 USING due
 WHERE e.verification_id = due.verification_id AND e.role = 'refused'
RETURNING e.verification_id
