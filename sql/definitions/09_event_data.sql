-- event_data: a webhook event's `data`, from the verification row as the state change left it
-- (record_event, sql/definitions/10_record_event.sql, adds the type's extras). The receiver's
-- contract (docs/webhooks.md, docs/openapi.yaml's webhooks): keys may be added, never removed or
-- renamed; never a token, a code or the destination. `channel` is the primary channel requested;
-- `verified_channel` / `verified_via` say which secret proved it (NULL until verified).
CREATE OR REPLACE FUNCTION event_data(p_verification verifications) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'verification_id', p_verification.id,
        'account_id', p_verification.account_id,
        'channel', p_verification.channel,
        'purpose', p_verification.purpose,
        'status', p_verification.status,
        'created_at', rfc3339(p_verification.created_at),
        'expires_at', rfc3339(p_verification.expires_at),
        'verified_at', rfc3339(p_verification.verified_at),
        'verified_channel', p_verification.verified_channel,
        'verified_via', p_verification.verified_via)
$$;
