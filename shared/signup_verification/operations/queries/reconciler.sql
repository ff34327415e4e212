-- The reconciler's run lock, its overdue count and its look-ups of ambiguous sends: one file of the
-- operations package's named statements (platform/catalogue.py).

-- name: run_lock
-- One reconcile run at a time per deployment: a session advisory lock on the heartbeat row's name
-- (it goes with the connection if the process dies).
SELECT pg_try_advisory_lock(hashtextextended(:name, 0))

-- name: run_unlock
-- The reconcile run is over: its session advisory lock is released.
SELECT pg_advisory_unlock(hashtextextended(:name, 0))

-- name: overdue
-- Eligible intents (the shared eligibility view the claim reads) that have waited longer than the
-- polling horizon, per channel. Reads the eligible partial index: cost follows the backlog only.
SELECT channel, count(*)::integer AS overdue,
       extract(epoch FROM now() - min(next_attempt_at))::float8 AS oldest_seconds
  FROM eligible_delivery_intents
 WHERE next_attempt_at <= now() - make_interval(secs => :horizon_seconds)
 GROUP BY channel
 ORDER BY channel

-- name: lookup_ambiguous_twilio
-- Ambiguous sends of the channels Twilio carries (:channels: SMS, WhatsApp, voice) to look up there: the
-- intent, its channel, its last begun attempt and the destination (never logged; a fallback intent has
-- its own). Oldest hold first, every channel in one order; redacted destinations cannot be looked up.
SELECT i.id AS intent_id, i.channel, a.attempt_id, a.attempted_at, coalesce(i.destination, v.destination) AS destination
  FROM delivery_intents AS i
  JOIN verifications AS v ON v.id = i.verification_id
  JOIN delivery_attempts AS a ON a.intent_id = i.id AND a.attempt_number = i.attempts AND a.outcome = 'attempting'
 WHERE i.status = 'ambiguous' AND i.channel = ANY (CAST(:channels AS text[]))
   AND coalesce(i.destination, v.destination) IS NOT NULL
 ORDER BY i.next_attempt_at, i.id
 LIMIT :limit

-- name: lookup_known_sids
-- Message and call sids already explained by an attempt of ours (provider_ref): a lookup must not take
-- an earlier message or call to the same number (an older signup's) as proof that this attempt was sent.
SELECT DISTINCT provider_ref FROM delivery_attempts WHERE provider_ref = ANY (CAST(:sids AS text[]))
