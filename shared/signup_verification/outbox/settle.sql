-- settle (fenced): attempting -> accepted | retryable | ambiguous | failed, with the outcome row
-- appended in the same statement. Returns (intent id, final status) for each row it settled; rows
-- whose lease was lost (expired, or taken over) match nothing: the caller counts them stale.
-- `decided` is the one place the final status is decided: a retryable outcome on the last allowed
-- attempt becomes failed (`exhausted`, reason attempts_exhausted); every SET expression below reads
-- that status, not the rule.
-- The UPDATE is joined to the input by the fence (the small leased index, whatever the history size).
-- A send never handed to the provider (`attempted` false: shutdown, no time left, its channel
-- stopped) is not charged: its attempt number stays used (attempt ids are Message-IDs/keys and
-- the log is append-only) and max_attempts grows by one, so the real sends allowed are unchanged
-- and it is never `exhausted`.
-- A failure carries its verdict (delivery/classification/): the reason (category, code, provider,
-- fault) is recorded on the intent, and what it sets off beyond the delivery runs here too: a
-- recipient's fault suppresses the exact destination, an account fault counts towards holding the
-- channel, a route fault towards holding its route only (sql/definitions/18, 19, 26), and delivery_failed
-- (sql/definitions/08) brings a fallback forward and records the events. While a run of route faults
-- is open on a channel, its sends settled here count in their routes' runs (the share a route hold
-- needs); otherwise no route is even looked up.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :versions::bigint[], :outcomes::text[], :delays::float8[],
                         :error_classes::text[], :error_details::text[], :provider_refs::text[],
                         :segments::integer[], :attempted::boolean[], :categories::text[], :codes::text[],
                         :providers::text[], :faults::text[], :scopes::text[])
        AS t(id, lease_version, outcome, delay_seconds, error_class, error_detail, provider_ref, segments, attempted,
             category, code, provider, fault, scope)
), decided AS (
    SELECT t.id, t.lease_version, t.outcome, t.delay_seconds, t.error_class, t.error_detail, t.provider_ref,
           t.segments, t.attempted, CASE WHEN e.exhausted THEN NULL ELSE t.scope END AS scope, e.exhausted,
           CASE WHEN e.exhausted THEN 'failed' ELSE t.outcome END AS status,
           CASE WHEN e.exhausted THEN 'attempts_exhausted' ELSE t.category END AS category,
           CASE WHEN e.exhausted THEN t.error_class ELSE t.code END AS code,
           t.provider,
           CASE WHEN e.exhausted THEN 'transient_or_unknown' ELSE t.fault END AS fault
      FROM input AS t
      JOIN delivery_intents AS i ON i.id = t.id
     CROSS JOIN LATERAL (SELECT t.outcome = 'retryable' AND t.attempted AND i.attempts >= i.max_attempts AS exhausted) AS e
), settled AS (
    UPDATE delivery_intents AS i
       SET status = d.status,
           max_attempts = i.max_attempts + (NOT d.attempted)::integer,
           lease_owner = NULL, lease_until = NULL,
           next_attempt_at = CASE WHEN d.status IN ('retryable', 'ambiguous')
                                  THEN now() + make_interval(secs => d.delay_seconds) ELSE i.next_attempt_at END,
           ambiguous_count = i.ambiguous_count + (d.status = 'ambiguous')::integer,
           last_error = CASE WHEN d.status = 'accepted' THEN NULL
                             WHEN d.exhausted
                             THEN left('attempts_exhausted: ' || coalesce(d.error_class, '') || ' ' || coalesce(d.error_detail, ''), 500)
                             ELSE left(coalesce(d.error_class, '') || ': ' || coalesce(d.error_detail, ''), 500) END,
           provider_ref = coalesce(d.provider_ref, i.provider_ref),
           completed_at = CASE WHEN d.status IN ('accepted', 'failed') THEN now() END,
           failed_at = CASE WHEN d.status = 'failed' THEN now() END,
           failure_category = CASE WHEN d.status = 'failed' THEN coalesce(d.category, 'unknown') END,
           failure_code = CASE WHEN d.status = 'failed' THEN left(d.code, 64) END,
           failure_provider = CASE WHEN d.status = 'failed' THEN d.provider END,
           failure_fault = CASE WHEN d.status = 'failed' THEN coalesce(d.fault, 'transient_or_unknown') END,
           updated_at = now()
      FROM decided AS d
     WHERE i.id = d.id AND i.lease_owner = :owner AND i.lease_version = d.lease_version
       AND i.status = 'attempting' AND i.sending_at IS NOT NULL AND i.lease_until > now()
    RETURNING i.id, i.attempts, i.channel, i.template_version, i.lease_version, i.last_claimed_at,
              d.outcome, d.status, d.error_class, d.error_detail, d.provider_ref, d.segments,
              i.failure_category, i.failure_code, i.failure_provider, i.failure_fault, d.scope, d.attempted
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                   lease_version, outcome, error_class, error_detail, provider_ref, segments,
                                   claimed_at, attempted_at)
    SELECT s.id || ':' || s.attempts, s.id, s.attempts, s.channel, s.template_version, :owner, s.lease_version,
           s.outcome, s.error_class, left(s.error_detail, 500), s.provider_ref, s.segments, s.last_claimed_at,
           (SELECT a.attempted_at FROM delivery_attempts AS a
             WHERE a.intent_id = s.id AND a.attempt_number = s.attempts AND a.outcome = 'attempting')
      FROM settled AS s
), failures AS MATERIALIZED (
    SELECT s.id, s.channel, s.failure_fault, s.scope,
           jsonb_build_object('intent_id', s.id, 'category', s.failure_category, 'code', s.failure_code,
                              'provider', s.failure_provider, 'fault', s.failure_fault) AS reason
      FROM settled AS s
     WHERE s.status = 'failed'
), followed AS (
    -- what a failure for good sets off (sql/definitions/08 and 18), in this statement
    SELECT delivery_failed((SELECT array_agg(f.id) FROM failures AS f),
                           (SELECT jsonb_agg(f.reason) FROM failures AS f)) AS written,
           suppress_destinations((SELECT jsonb_agg(f.reason) FROM failures AS f WHERE f.failure_fault = 'recipient'),
                                 make_interval(secs => CAST(:suppress_seconds AS float8))) AS suppressed,
           (SELECT count(*) FROM (
                SELECT record_sender_faults(f.channel, count(*)::integer, min(f.reason ->> 'category'),
                                            min(f.reason ->> 'code'), min(f.reason ->> 'provider'),
                                            CAST(:hold_after AS integer),
                                            make_interval(secs => CAST(:hold_window AS float8)),
                                            make_interval(secs => CAST(:hold_seconds AS float8)))
                  FROM failures AS f WHERE f.scope = 'account' GROUP BY f.channel) AS h) AS holds,
           record_route_outcomes(
               (SELECT jsonb_agg(jsonb_build_object('intent_id', s.id, 'sent', true,
                                                    'fault', s.status = 'failed' AND s.scope = 'route',
                                                    'category', s.failure_category, 'code', s.failure_code,
                                                    'provider', s.failure_provider))
                  FROM settled AS s
                 WHERE s.attempted AND s.channel IN ('email', 'sms')
                   AND ((s.status = 'failed' AND s.scope = 'route')
                        OR s.channel IN (SELECT h.channel FROM channel_holds AS h
                                          WHERE h.route <> ''
                                            AND h.window_started_at > now() - make_interval(secs => CAST(:hold_window AS float8))))),
               CAST(:route_min_destinations AS integer), CAST(:route_min_share AS float8),
               make_interval(secs => CAST(:hold_window AS float8)),
               make_interval(secs => CAST(:hold_seconds AS float8))) AS route_holds
)
SELECT s.id AS intent_id, s.status FROM settled AS s, followed
