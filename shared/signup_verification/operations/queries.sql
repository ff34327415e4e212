-- The operations package's named statements (platform/catalogue.py).

-- name: signals
-- Operator signals per channel in one statement. `ready` reads the eligible_delivery_intents view:
-- the very definition the claim uses, so a scheduled (future) or suppressed intent never ages the
-- signal. Every part reads a partial index or a time-bounded range, so the cost follows the live
-- set and the window, never the history.
-- :channels: every channel the outbox delivers on (platform/channels.py's DELIVERY_CHANNELS).
WITH channels (channel) AS (SELECT unnest(CAST(:channels AS text[]))),
ready AS (
    SELECT channel, count(*) AS n, min(next_attempt_at) AS oldest
      FROM eligible_delivery_intents
     GROUP BY channel
), scheduled AS (
    SELECT channel, count(*) AS n
      FROM delivery_intents
     WHERE status IN ('ready', 'retryable') AND next_attempt_at > now()
     GROUP BY channel
), leased AS (
    SELECT channel, count(*) FILTER (WHERE status = 'claimed') AS claimed,
           count(*) FILTER (WHERE status = 'attempting') AS attempting,
           count(*) FILTER (WHERE lease_until <= now()) AS expired
      FROM delivery_intents
     WHERE status IN ('claimed', 'attempting')
     GROUP BY channel
), ambiguous AS (
    SELECT channel, count(*) AS n, count(*) FILTER (WHERE ambiguous_count >= 2) AS oscillating
      FROM delivery_intents
     WHERE status = 'ambiguous'
     GROUP BY channel
), oscillating_elsewhere AS (
    -- intents that were ambiguous twice or more and are live again (one branch per partial index)
    SELECT channel, count(*) AS n FROM (
        SELECT channel FROM delivery_intents WHERE status IN ('ready', 'retryable') AND ambiguous_count >= 2
        UNION ALL
        SELECT channel FROM delivery_intents WHERE status IN ('claimed', 'attempting') AND ambiguous_count >= 2
    ) AS o
     GROUP BY channel
), attempts AS (
    SELECT channel, jsonb_object_agg(outcome, n) AS by_outcome FROM (
        SELECT channel, outcome, count(*) AS n
          FROM delivery_attempts
         WHERE observed_at > now() - make_interval(secs => :window_seconds)
         GROUP BY channel, outcome
    ) AS a
     GROUP BY channel
), later_steps AS (
    -- later steps (2 and 3, role fallback) whose sending began in the window, by step and by why
    -- they became due: timer (their after_seconds passed), brought_forward (the step before failed
    -- for good), at_once (policy both); and those suppressed in the window (never sent: the
    -- verification was confirmed, superseded, expired or locked first). {"2": {"timer": n, ...}}
    SELECT channel, jsonb_object_agg(step, by_reason) AS by_step FROM (
        SELECT channel, step, jsonb_object_agg(reason, n) AS by_reason FROM (
            SELECT i.channel, intent_step(i.verification_id, i.id) AS step,
                   CASE WHEN i.brought_forward_at IS NOT NULL THEN 'brought_forward'
                        WHEN i.policy = 'both' THEN 'at_once' ELSE 'timer' END AS reason,
                   count(DISTINCT i.id) AS n
              FROM delivery_attempts AS a JOIN delivery_intents AS i ON i.id = a.intent_id
             WHERE a.observed_at > now() - make_interval(secs => :window_seconds) AND a.outcome = 'attempting'
               AND i.role = 'fallback'
             GROUP BY 1, 2, 3
            UNION ALL
            SELECT channel, intent_step(verification_id, id), 'suppressed', count(*)
              FROM delivery_intents
             WHERE completed_at > now() - make_interval(secs => :window_seconds) AND status = 'suppressed'
               AND role = 'fallback'
             GROUP BY 1, 2
        ) AS r
         GROUP BY channel, step
    ) AS s
     GROUP BY channel
), reports AS (
    -- accepted deliveries still without the provider's delivered report (accepted in the last
    -- day: a report lost for good stops counting after a day), on delivery_intents_awaiting_report
    SELECT channel, count(*) AS n, min(completed_at) AS oldest
      FROM delivery_intents
     WHERE status = 'accepted' AND delivered_at IS NULL AND completed_at > now() - interval '1 day'
       AND channel <> 'webhook'
     GROUP BY channel
), delivered AS (
    -- deliveries reported delivered in the window, and accepted -> delivered latency
    SELECT channel, count(*) AS n,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY greatest(extract(epoch FROM delivered_at - completed_at), 0)) AS p50,
           percentile_cont(0.95) WITHIN GROUP (ORDER BY greatest(extract(epoch FROM delivered_at - completed_at), 0)) AS p95
      FROM delivery_intents
     WHERE delivered_at > now() - make_interval(secs => :window_seconds) AND channel <> 'webhook'
     GROUP BY channel
), wrong_codes AS (
    -- wrong codes typed in the last day (the per-destination budget);
    -- on verifications_wrong_codes: only verifications a wrong code was typed for (only a
    -- verification with a code channel counts them: verifications/queries.sql:confirm_wrong_code)
    SELECT coalesce(sum(confirm_failures), 0)::integer AS n
      FROM verifications
     WHERE destination IS NOT NULL AND created_at > now() - interval '1 day' AND confirm_failures > 0
), holds AS (
    -- channels held after a run of account faults, and the latest run (record_sender_faults)
    SELECT channel, faults, window_started_at, last_fault_at, category, code, provider, held_at,
           CASE WHEN held_until > now() THEN held_until END AS held_until,
           last_fault_at > now() - make_interval(secs => :window_seconds) AS recent
      FROM channel_holds
     WHERE route = ''
), route_holds AS (
    -- routes held after route faults from several destinations, and recent runs of route faults
    -- (a handful of rows at most: a route's row is forgotten once its run is over and it is not held)
    SELECT channel,
           jsonb_agg(jsonb_build_object(
               'scope', scope, 'route', channel || ':' || route,
               'held_until', CASE WHEN held_until > now() THEN rfc3339(held_until) END, 'held_at', rfc3339(held_at),
               'faults', faults, 'sends', attempts, 'destinations', cardinality(destinations),
               'accounts', cardinality(accounts), 'since', rfc3339(window_started_at),
               'last_fault_at', rfc3339(last_fault_at),
               'reason', jsonb_build_object('category', category, 'code', code, 'provider', provider))
               ORDER BY held_until > now() DESC NULLS LAST, last_fault_at DESC) AS runs
      FROM channel_holds
     WHERE route <> '' AND (held_until > now() OR last_fault_at > now() - make_interval(secs => :window_seconds))
     GROUP BY channel
), pacing AS (
    -- a provider's 429 slowed the channel: no claim takes its intents until then (channel_slowed)
    SELECT channel, extract(epoch FROM slow_until - now())::float8 AS seconds_left
      FROM channel_pacing
     WHERE slow_until > now()
), heartbeats AS (
    SELECT (SELECT last_claim_at FROM worker_heartbeats WHERE name = 'dispatch:' || :deployment) AS last_claim_at,
           (SELECT (watermark ->> 'covered_through')::timestamptz FROM worker_heartbeats
             WHERE name = 'reconcile:' || :deployment) AS covered_through
)
SELECT c.channel,
       now() AS measured_at,
       coalesce(r.n, 0)::integer AS ready_count,
       coalesce(extract(epoch FROM now() - r.oldest), 0)::float8 AS oldest_ready_verification_seconds,
       coalesce(s.n, 0)::integer AS scheduled_count,
       coalesce(l.claimed, 0)::integer AS claimed_count,
       coalesce(l.attempting, 0)::integer AS attempting_count,
       coalesce(l.expired, 0)::integer AS expired_lease_count,
       coalesce(a.n, 0)::integer AS ambiguous_count,
       (coalesce(a.oscillating, 0) + coalesce(o.n, 0))::integer AS oscillating_count,
       coalesce(t.by_outcome, '{}'::jsonb) || jsonb_build_object('delivered', coalesce(dl.n, 0)) AS attempts,
       coalesce(rp.n, 0)::integer AS awaiting_report_count,
       coalesce(extract(epoch FROM now() - rp.oldest), 0)::float8 AS oldest_awaiting_report_seconds,
       dl.p50::float8 AS delivery_latency_p50_seconds,
       dl.p95::float8 AS delivery_latency_p95_seconds,
       coalesce(f.by_step, '{}'::jsonb) AS later_steps,
       h.last_claim_at,
       extract(epoch FROM now() - h.last_claim_at)::float8 AS last_claim_age_seconds,
       h.covered_through AS reconciler_watermark,
       extract(epoch FROM now() - h.covered_through)::float8 AS reconciler_watermark_age_seconds,
       -- the global SMS budget (sms_budget_left, SMS and WhatsApp): 0 = their sends paused
       sms_budget_left(CAST(:sms_max AS integer)) AS sms_budget_left,
       date_trunc('hour', now(), 'UTC') + interval '1 hour' AS sms_budget_resets_at,
       coalesce((SELECT extra FROM sms_budget_grants WHERE hour = date_trunc('hour', now(), 'UTC')), 0)::integer
           AS sms_budget_granted,
       -- the call budget (voice_budget_left): 0 = calls paused
       voice_budget_left(CAST(:voice_max AS integer)) AS voice_budget_left,
       coalesce((SELECT extra FROM voice_budget_grants WHERE hour = date_trunc('hour', now(), 'UTC')), 0)::integer
           AS voice_budget_granted,
       coalesce(pc.seconds_left, 0)::float8 AS slowed_seconds,
       (SELECT count(*) FROM dispatch_invocations WHERE deployment = :deployment AND until > now())::integer
           AS fanout_live,
       w.n AS wrong_codes_last_day,
       CASE WHEN hd.held_until IS NOT NULL OR hd.recent THEN jsonb_build_object(
           'held_until', rfc3339(hd.held_until), 'held_at', rfc3339(hd.held_at), 'faults', hd.faults,
           'since', rfc3339(hd.window_started_at), 'last_fault_at', rfc3339(hd.last_fault_at),
           'scope', 'account',
           'reason', jsonb_build_object('category', hd.category, 'code', hd.code, 'provider', hd.provider,
                                        'fault', 'sender_or_account')) END AS sender_faults,
       coalesce(rh.runs, '[]'::jsonb) AS route_holds
  FROM channels AS c
  LEFT JOIN ready AS r USING (channel)
  LEFT JOIN scheduled AS s USING (channel)
  LEFT JOIN leased AS l USING (channel)
  LEFT JOIN ambiguous AS a USING (channel)
  LEFT JOIN oscillating_elsewhere AS o USING (channel)
  LEFT JOIN attempts AS t USING (channel)
  LEFT JOIN later_steps AS f USING (channel)
  LEFT JOIN reports AS rp USING (channel)
  LEFT JOIN delivered AS dl USING (channel)
  LEFT JOIN holds AS hd USING (channel)
  LEFT JOIN route_holds AS rh USING (channel)
  LEFT JOIN pacing AS pc USING (channel)
 CROSS JOIN heartbeats AS h
 CROSS JOIN wrong_codes AS w
 ORDER BY c.channel

-- name: timeline_verification
-- verifyctl inspect: the verification, its proofs (verifications/proofs.py) and its (primary) delivery
-- intent (never the nonce or the digest); the later steps' intents are read by operations/queries.sql:timeline_fallback.
SELECT v.id, v.account_id, v.channel, v.destination, v.purpose, v.locale, v.status, v.expires_at,
       v.created_at, v.updated_at, v.verified_at, v.verified_channel, v.verified_via, v.second_proof_at,
       v.second_proof_channel, v.third_proof_at,
       v.redacted_at, v.superseded_by, v.confirm_failures, v.fallback_channel, v.step3_channel,
       (SELECT f.destination FROM delivery_intents AS f  -- a step's channel names it
         WHERE f.verification_id = v.id AND f.channel = v.fallback_channel AND f.role = 'fallback') AS fallback_destination,
       (SELECT f.destination FROM delivery_intents AS f
         WHERE f.verification_id = v.id AND f.channel = v.step3_channel AND f.role = 'fallback') AS step3_destination,
       i.id AS intent_id, i.status AS intent_status, i.template_version, i.attempts, i.max_attempts,
       i.ambiguous_count, i.lease_owner, i.lease_until, i.lease_version, i.next_attempt_at, i.last_error,
       i.provider_ref, i.suppression_reason, i.created_at AS intent_created_at, i.last_claimed_at,
       i.completed_at, i.updated_at AS intent_updated_at, i.delivered_at, i.failed_at, i.failure_category,
       i.failure_code, i.failure_provider, i.failure_fault, i.undeliverable_reason
  FROM verifications AS v
  -- its message intent (webhook events: operations/queries.sql:timeline_events)
  LEFT JOIN delivery_intents AS i ON i.verification_id = v.id AND i.role = 'primary'
 WHERE v.id = :verification_id

-- name: timeline_attempts
-- verifyctl inspect: the attempt log of one intent, in the order it was written.
SELECT attempt_id, attempt_number, outcome, lease_owner, lease_version, error_class, error_detail,
       provider_ref, segments, claimed_at, attempted_at, observed_at
  FROM delivery_attempts
 WHERE intent_id = :intent_id
 ORDER BY id

-- name: timeline_events
-- verifyctl inspect: the webhook events of one verification, each with its attempt log
-- (the same append-only rows as a message's), oldest first. The payload holds no secret or destination.
SELECT i.id, i.event_type, i.event_subject, i.status, i.attempts, i.max_attempts, i.ambiguous_count, i.next_attempt_at,
       i.last_error, i.created_at, i.completed_at,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                     'attempt_id', a.attempt_id, 'outcome', a.outcome, 'error_class', a.error_class,
                     'error_detail', a.error_detail, 'observed_at', a.observed_at) ORDER BY a.id)
                   FROM delivery_attempts AS a WHERE a.intent_id = i.id), '[]'::jsonb) AS attempt_log
  FROM delivery_intents AS i
 WHERE i.verification_id = :verification_id AND i.role = 'event'
 ORDER BY i.id

-- name: timeline_reports
-- verifyctl inspect: the provider reports about one verification's deliveries, in order.
SELECT o.provider, o.event, o.detail, o.error_code, o.permanent, o.attempt_id, o.provider_at, o.received_at
  FROM delivery_observations AS o
  JOIN delivery_intents AS i ON i.id = o.intent_id
 WHERE i.verification_id = :verification_id
 ORDER BY o.id

-- name: timeline_fallback
-- verifyctl inspect: the verification's later steps' delivery intents (the fallback, step 3), in step order.
SELECT i.id, intent_step(i.verification_id, i.id) AS step, i.channel, i.destination, i.policy, i.after_seconds, i.status, i.attempts, i.max_attempts,
       i.next_attempt_at, i.brought_forward_at, i.suppression_reason, i.last_error, i.provider_ref,
       i.created_at, i.completed_at, i.last_claimed_at, i.lease_owner, i.lease_version, i.delivered_at,
       i.failed_at, i.failure_category, i.failure_code, i.failure_provider, i.failure_fault,
       (SELECT CASE WHEN p.status = 'failed' THEN p.completed_at END FROM delivery_intents AS p
         WHERE p.verification_id = i.verification_id AND p.role <> 'event' AND p.id < i.id
         ORDER BY p.id DESC LIMIT 1) AS previous_failed_at  -- the step before it, when it failed for good
  FROM delivery_intents AS i
 WHERE i.verification_id = :verification_id AND i.role = 'fallback'
 ORDER BY i.id

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

-- name: retention_unlock
-- Inside a retention batch's transaction only: the one way past the attempt log's append-only
-- trigger (redact scrubs error texts, purge deletes whole histories).
SET LOCAL signup_verification.retention_purge = 'on'

-- name: redact
-- Redact: finished verifications older than the destination-retention window lose their destination
-- (verifications.destination = NULL, redacted_at set). A provider error text that quoted the address
-- ("550 5.1.1 <ada@example.com> unknown") is scrubbed from the intent and its attempt rows in the
-- same statement; the caller has set signup_verification.retention_purge for the attempt log.
-- Reads verifications_unredacted (created_at WHERE destination IS NOT NULL): what it redacts.
WITH due AS (
    SELECT v.id, v.destination FROM verifications AS v
     WHERE v.destination IS NOT NULL
       AND v.created_at < now() - make_interval(secs => :redact_after_seconds)
       AND v.status <> 'pending'
       -- its delivery finished: a per-row probe of the unique verification_id index (written as a
       -- scalar subquery: as NOT EXISTS the planner may hash a scan of every intent instead);
       -- every intent of it (bool_and: a verification may own several, its webhook events too)
       AND coalesce((SELECT bool_and(i.completed_at IS NOT NULL) FROM delivery_intents AS i
                      WHERE i.verification_id = v.id), true)
     ORDER BY v.created_at
     LIMIT :limit
       FOR UPDATE OF v SKIP LOCKED
), pattern AS (
    -- the destination as a literal regular expression (every non-alphanumeric escaped);
    -- a fallback intent's own destination for it (the one its provider errors may quote)
    SELECT d.id, i.id AS intent_id, i.last_error ~* r.re AS quoted, r.re
      FROM due AS d JOIN delivery_intents AS i ON i.verification_id = d.id
     CROSS JOIN LATERAL (SELECT regexp_replace(coalesce(i.destination, d.destination), '([^A-Za-z0-9])', '\\\1', 'g') AS re) AS r
), scrubbed_intents AS (
    -- a fallback's destination is redacted with the verification's, in this one UPDATE
    UPDATE delivery_intents AS i
       SET last_error = CASE WHEN p.quoted THEN regexp_replace(i.last_error, p.re, '[redacted]', 'gi') ELSE i.last_error END,
           destination = NULL
      FROM pattern AS p
     WHERE i.id = p.intent_id AND (p.quoted OR i.destination IS NOT NULL)
    RETURNING i.id, p.quoted
), scrubbed_attempts AS (
    UPDATE delivery_attempts AS a
       SET error_detail = regexp_replace(a.error_detail, p.re, '[redacted]', 'gi')
      FROM pattern AS p
     WHERE a.intent_id = p.intent_id AND a.error_detail ~* p.re
    RETURNING a.id
)
UPDATE verifications AS v
   SET destination = NULL, redacted_at = now(), updated_at = now()
  FROM due
 WHERE v.id = due.id
RETURNING v.id, (SELECT count(*) FROM scrubbed_intents WHERE quoted) + (SELECT count(*) FROM scrubbed_attempts) AS scrubbed

-- name: purge
-- Purge: redacted verifications whose intent finished before the evidence-retention window are
-- deleted with their intents, create_events and attempt history. None of those has a foreign key
-- (no_orphans): their rows are deleted here, in this statement (attempts by intent id: their
-- primary key leads with it; intents by verification id), so a purge can never leave
-- an orphan (the DELETE triggers calling no_orphans would refuse it). The caller has set
-- signup_verification.retention_purge so the attempt log's append-only trigger lets the rows go.
-- Only finished intents are purged, and no statement appends an attempt row for a finished intent
-- (each one appends for the intent its fenced UPDATE just moved), so none can arrive afterwards.
-- Reads delivery_intents_completed (completed_at): what it purges. A verification still named as
-- superseded_by of one that stays is kept for a later batch (superseded_by's foreign key would refuse it).
WITH due AS (
    SELECT i.verification_id AS id
      FROM delivery_intents AS i
      JOIN verifications AS v ON v.id = i.verification_id
     WHERE i.completed_at < now() - make_interval(secs => :purge_after_seconds)
       AND v.redacted_at IS NOT NULL
       -- several intents per verification (events, fallback): all of them past it
       AND NOT EXISTS (SELECT 1 FROM delivery_intents AS o
                        WHERE o.verification_id = i.verification_id
                          AND (o.completed_at IS NULL
                               OR o.completed_at >= now() - make_interval(secs => :purge_after_seconds)))
     ORDER BY i.completed_at
     LIMIT :limit
), purgeable AS (
    SELECT DISTINCT d.id FROM due AS d
     WHERE NOT EXISTS (SELECT 1 FROM verifications AS w
                        WHERE w.superseded_by = d.id AND w.id NOT IN (SELECT id FROM due))
), events_gone AS (
    -- create_events has no foreign key either: its rows go here too
    DELETE FROM create_events AS e USING purgeable AS p WHERE e.verification_id = p.id
), intents_gone AS (
    DELETE FROM delivery_intents AS i USING purgeable AS p WHERE i.verification_id = p.id
), attempts_gone AS (
    DELETE FROM delivery_attempts AS a
     USING purgeable AS p, delivery_intents AS i
     WHERE i.verification_id = p.id AND a.intent_id = i.id
)
DELETE FROM verifications AS v
 USING purgeable AS p
 WHERE v.id = p.id
RETURNING v.id, (SELECT count(*) FROM due) AS examined
