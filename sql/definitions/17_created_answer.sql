-- created_answer: what a 'created' create answers (the verification's fields, ISO timestamps; the
-- fallback's policy, never its destination). One definition for the first answer and every replay
-- of it (create_verification rebuilds it from the idempotency record's columns, sql/015), so the two
-- cannot drift apart. A single SELECT of an expression: the planner inlines it where it is called.
CREATE OR REPLACE FUNCTION created_answer(
    p_id uuid, p_account_id text, p_channel text, p_created_at timestamptz, p_expires_at timestamptz,
    p_fallback_channel text, p_fallback_after_seconds integer)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
               'verification_id', p_id,
               'account_id', p_account_id,
               'channel', p_channel,
               'status', 'pending',
               'expires_at', rfc3339(p_expires_at),
               'created_at', rfc3339(p_created_at))
           || CASE WHEN p_fallback_channel IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('fallback', jsonb_build_object(
                            'channel', p_fallback_channel, 'after_seconds', p_fallback_after_seconds,
                            'policy', channel_policy(p_fallback_channel, p_fallback_after_seconds))) END
$$;
