-- settle (fenced): attempting -> accepted | retryable | ambiguous | failed, with the outcome row
-- appended in the same statement. A retryable outcome on the last allowed attempt becomes failed.
-- Rows whose lease was lost (expired, or taken over) match nothing: the caller counts them stale.
-- One UPDATE joined to the input by the fence (the small leased index, whatever the history size);
-- every SET expression reads the row as it was, so `exhausted` is spelled out where it matters.
-- A send never handed to the provider (`attempted` false: shutdown, no time left, its channel
-- stopped) is not charged: its attempt number stays used (attempt ids are Message-IDs/keys and
-- the log is append-only) and max_attempts grows by one, so the real sends allowed are unchanged
-- and it is never `exhausted`.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :versions::bigint[], :outcomes::text[], :delays::float8[],
                         :error_classes::text[], :error_details::text[], :provider_refs::text[],
                         :segments::integer[], :attempted::boolean[])
        AS t(id, lease_version, outcome, delay_seconds, error_class, error_detail, provider_ref, segments, attempted)
), settled AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN t.outcome = 'retryable' AND t.attempted AND i.attempts >= i.max_attempts THEN 'failed'
                         ELSE t.outcome END,
           max_attempts = i.max_attempts + (NOT t.attempted)::integer,
           lease_owner = NULL, lease_until = NULL,
           next_attempt_at = CASE WHEN t.outcome = 'ambiguous'
                                    OR (t.outcome = 'retryable' AND (NOT t.attempted OR i.attempts < i.max_attempts))
                                  THEN now() + make_interval(secs => t.delay_seconds) ELSE i.next_attempt_at END,
           ambiguous_count = i.ambiguous_count + (t.outcome = 'ambiguous')::integer,
           last_error = CASE WHEN t.outcome = 'accepted' THEN NULL
                             WHEN t.outcome = 'retryable' AND t.attempted AND i.attempts >= i.max_attempts
                             THEN left('attempts_exhausted: ' || coalesce(t.error_class, '') || ' ' || coalesce(t.error_detail, ''), 500)
                             ELSE left(coalesce(t.error_class, '') || ': ' || coalesce(t.error_detail, ''), 500) END,
           provider_ref = coalesce(t.provider_ref, i.provider_ref),
           completed_at = CASE WHEN t.outcome IN ('accepted', 'failed')
                                 OR (t.outcome = 'retryable' AND t.attempted AND i.attempts >= i.max_attempts) THEN now() END,
           updated_at = now()
      FROM input AS t
     WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
       AND i.status = 'attempting' AND i.lease_until > now()
    RETURNING i.id, i.attempts, i.channel, i.template_version, i.lease_version, i.last_claimed_at,
              t.outcome, t.error_class, t.error_detail, t.provider_ref, t.segments
)
INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                               lease_version, outcome, error_class, error_detail, provider_ref, segments,
                               claimed_at, attempted_at)
SELECT s.id || ':' || s.attempts, s.id, s.attempts, s.channel, s.template_version, :owner, s.lease_version,
       s.outcome, s.error_class, left(s.error_detail, 500), s.provider_ref, s.segments, s.last_claimed_at,
       (SELECT a.attempted_at FROM delivery_attempts AS a
         WHERE a.attempt_id = s.id || ':' || s.attempts AND a.outcome = 'attempting')
  FROM settled AS s
RETURNING intent_id, outcome
