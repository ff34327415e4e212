-- The signals: every number of the status and the alerts, in one statement: one file of the operations
-- package's named statements (platform/catalogue.py).

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
    -- verification with a code channel counts them: verifications/queries/confirm.sql:confirm_wrong_code)
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
