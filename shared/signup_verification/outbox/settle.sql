-- settle (fenced): attempting -> accepted | retryable | ambiguous | failed, with the outcome row
-- appended in the same statement. A retryable outcome on the last allowed attempt becomes failed.
-- Rows whose lease was lost (expired, or taken over) match nothing: the caller counts them stale.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :versions::bigint[], :outcomes::text[], :delays::float8[],
                         :error_classes::text[], :error_details::text[], :provider_refs::text[],
                         :segments::integer[])
        AS t(id, lease_version, outcome, delay_seconds, error_class, error_detail, provider_ref, segments)
), target AS (
    SELECT t.*, CASE WHEN t.outcome = 'retryable' AND i.attempts >= i.max_attempts THEN 'failed'
                     ELSE t.outcome END AS new_status
      FROM input AS t JOIN delivery_intents AS i ON i.id = t.id
), settled AS (
    UPDATE delivery_intents AS i
       SET status = t.new_status,
           lease_owner = NULL, lease_until = NULL,
           next_attempt_at = CASE WHEN t.new_status IN ('retryable', 'ambiguous')
                                  THEN now() + make_interval(secs => t.delay_seconds) ELSE i.next_attempt_at END,
           ambiguous_count = i.ambiguous_count + (t.new_status = 'ambiguous')::integer,
           last_error = CASE WHEN t.new_status = 'accepted' THEN NULL
                             WHEN t.new_status = 'failed' AND t.outcome = 'retryable'
                             THEN left('attempts_exhausted: ' || coalesce(t.error_class, '') || ' ' || coalesce(t.error_detail, ''), 500)
                             ELSE left(coalesce(t.error_class, '') || ': ' || coalesce(t.error_detail, ''), 500) END,
           provider_ref = coalesce(t.provider_ref, i.provider_ref),
           completed_at = CASE WHEN t.new_status IN ('accepted', 'failed') THEN now() END,
           updated_at = now()
      FROM target AS t
     WHERE i.id = t.id AND i.lease_owner = :owner AND i.lease_version = t.lease_version
       AND i.status = 'attempting' AND i.lease_until > now()
    RETURNING i.id, i.attempts, i.channel, i.template_version, i.lease_version, i.last_claimed_at, i.status
)
INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, lease_owner,
                               lease_version, outcome, error_class, error_detail, provider_ref, segments,
                               claimed_at, attempted_at)
SELECT s.id || ':' || s.attempts, s.id, s.attempts, s.channel, s.template_version, :owner, s.lease_version,
       t.outcome, t.error_class, left(t.error_detail, 500), t.provider_ref, t.segments, s.last_claimed_at,
       (SELECT a.attempted_at FROM delivery_attempts AS a
         WHERE a.attempt_id = s.id || ':' || s.attempts AND a.outcome = 'attempting')
  FROM settled AS s JOIN target AS t ON t.id = s.id
RETURNING intent_id, outcome
