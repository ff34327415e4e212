-- resolve by lookup: an ambiguous SMS the reconciler looked up at the provider.
--   found  (sid given)  -> accepted with that sid as provider_ref: it was sent, later reports attach to it;
--   absent (sid NULL)   -> retryable (attempts left) or failed (attempts_exhausted): the provider's
--                          settled listing has no such message, so it was never created and a new
--                          attempt sends it once.
-- Only rows still ambiguous with the same attempt move (a concurrent report or resolve wins); the
-- attempt log gains the outcome of the looked-up attempt in the same statement.
WITH input AS (
    SELECT * FROM unnest(:ids::bigint[], :attempt_ids::text[], :sids::text[]) AS t(id, attempt_id, sid)
), resolved AS (
    UPDATE delivery_intents AS i
       SET status = CASE WHEN t.sid IS NOT NULL THEN 'accepted'
                         WHEN i.attempts < i.max_attempts THEN 'retryable' ELSE 'failed' END,
           provider_ref = coalesce(t.sid, i.provider_ref),
           completed_at = CASE WHEN t.sid IS NOT NULL OR i.attempts >= i.max_attempts THEN now() END,
           last_error = CASE WHEN t.sid IS NOT NULL THEN NULL
                             WHEN i.attempts < i.max_attempts THEN 'ambiguous: provider has no such message, retrying'
                             ELSE 'ambiguous: provider has no such message, no attempt left' END,
           failed_at = CASE WHEN t.sid IS NULL AND i.attempts >= i.max_attempts THEN now() END,
           failure_category = CASE WHEN t.sid IS NULL AND i.attempts >= i.max_attempts THEN 'attempts_exhausted' END,
           failure_fault = CASE WHEN t.sid IS NULL AND i.attempts >= i.max_attempts THEN 'transient_or_unknown' END,
           next_attempt_at = now(), updated_at = now()
      FROM input AS t
     WHERE i.id = t.id AND i.status = 'ambiguous'
       AND t.attempt_id = i.id || ':' || i.attempts
    RETURNING i.id, i.status, i.channel, i.template_version, i.attempts, t.attempt_id, t.sid
), logged AS (
    INSERT INTO delivery_attempts (attempt_id, intent_id, attempt_number, channel, template_version, outcome,
                                   error_class, provider_ref, attempted_at)
    SELECT r.attempt_id, r.id, r.attempts, r.channel, r.template_version,
           CASE WHEN r.status = 'accepted' THEN 'accepted' WHEN r.status = 'retryable' THEN 'retryable' ELSE 'failed' END,
           CASE WHEN r.sid IS NOT NULL THEN 'provider_lookup_found' ELSE 'provider_lookup_absent' END, r.sid,
           (SELECT a.attempted_at FROM delivery_attempts AS a
             WHERE a.intent_id = r.id AND a.attempt_number = r.attempts AND a.outcome = 'attempting')
      FROM resolved AS r
    ON CONFLICT (intent_id, attempt_number, outcome) DO NOTHING  -- one row per attempt and outcome
), followed AS (
    -- what a failure for good sets off (sql/definitions/08_delivery_failed.sql), in this statement
    SELECT delivery_failed(array_agg(r.id) FILTER (WHERE r.status = 'failed'),
                           jsonb_agg(jsonb_build_object('intent_id', r.id, 'category', 'attempts_exhausted',
                                                        'fault', 'transient_or_unknown'))
                               FILTER (WHERE r.status = 'failed')) AS written
      FROM resolved AS r
)
SELECT r.id, r.status FROM resolved AS r, followed
