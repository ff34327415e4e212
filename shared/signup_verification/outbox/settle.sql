-- settle (fenced): attempting -> accepted | retryable | ambiguous | failed, with the outcome row
-- appended in the same statement. Returns (intent id, final status) for each row it settled; rows
-- whose lease was lost (expired, or taken over) match nothing: the caller counts them stale.
-- `decided` is the one place the final status is decided: a retryable outcome on the last allowed
-- attempt becomes failed (`exhausted`); every SET expression below reads that status, not the rule.
-- The UPDATE is joined to the input by the fence (the small leased index, whatever the history size).
-- A send never handed to the provider (`attempted` false: shutdown, no time left, its channel
-- stopped) is not charged: its attempt number stays used (attempt ids are Message-IDs/keys and
-- the log is append-only) and max_attempts grows by one, so the real sends allowed are unchanged
-- and it is never `exhausted`.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :versions::bigint[], :outcomes::text[], :delays::float8[],
                         :error_classes::text[], :error_details::text[], :provider_refs::text[],
                         :segments::integer[], :attempted::boolean[])
        AS t(id, lease_version, outcome, delay_seconds, error_class, error_detail, provider_ref, segments, attempted)
), decided AS (
    SELECT t.*, e.exhausted, CASE WHEN e.exhausted THEN 'failed' ELSE t.outcome END AS status
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
           updated_at = now()
      FROM decided AS d
     WHERE i.id = d.id AND i.lease_owner = :owner AND i.lease_version = d.lease_version
       AND i.status = 'attempting' AND i.sending_at IS NOT NULL AND i.lease_until > now()
    RETURNING i.id, i.attempts, i.channel, i.template_version, i.lease_version, i.last_claimed_at,
              d.outcome, d.status, d.error_class, d.error_detail, d.provider_ref, d.segments
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                                   lease_version, outcome, error_class, error_detail, provider_ref, segments,
                                   claimed_at, attempted_at)
    SELECT s.id || ':' || s.attempts, s.id, s.attempts, s.channel, s.template_version, :owner, s.lease_version,
           s.outcome, s.error_class, left(s.error_detail, 500), s.provider_ref, s.segments, s.last_claimed_at,
           (SELECT a.attempted_at FROM delivery_attempts AS a
             WHERE a.intent_id = s.id AND a.attempt_number = s.attempts AND a.outcome = 'attempting')
      FROM settled AS s
), followed AS (
    -- what a failure for good sets off (sql/definitions/08_delivery_failed.sql), in this statement
    SELECT delivery_failed(array_agg(s.id) FILTER (WHERE s.status = 'failed')) AS written FROM settled AS s
)
SELECT s.id AS intent_id, s.status FROM settled AS s, followed
