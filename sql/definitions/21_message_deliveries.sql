-- message_deliveries: every message delivery (primary, fallback) of the verifications the failed
-- intents belong to, as the site reads it: the failed ones with the reasons passed in, the others as
-- their rows are now (a suppressed one by why).
CREATE OR REPLACE FUNCTION message_deliveries(p_intent_ids bigint[], p_reasons jsonb)
RETURNS TABLE (verification_id uuid, intent_id bigint, channel text, role text, status text, failed_at text,
               reason jsonb, just_failed boolean)
LANGUAGE sql STABLE AS $$
    SELECT m.verification_id, m.id, m.channel, m.role,
           CASE WHEN m.id = ANY (p_intent_ids) THEN coalesce(r.status, 'failed')
                WHEN m.status = 'failed' AND m.undeliverable_reason IS NOT NULL THEN 'undeliverable'
                ELSE m.status END,
           CASE WHEN m.id = ANY (p_intent_ids) THEN rfc3339(now()) ELSE rfc3339(m.failed_at) END,
           CASE WHEN m.id = ANY (p_intent_ids)
                THEN jsonb_build_object('category', coalesce(r.category, 'unknown'), 'code', r.code,
                                        'provider', r.provider, 'fault', coalesce(r.fault, 'transient_or_unknown'))
                WHEN m.status = 'failed'
                THEN jsonb_build_object('category', coalesce(m.failure_category, 'unknown'), 'code', m.failure_code,
                                        'provider', m.failure_provider,
                                        'fault', coalesce(m.failure_fault, 'transient_or_unknown'))
                WHEN m.status = 'suppressed'
                THEN jsonb_build_object('category', CASE WHEN m.suppression_reason = 'expired' THEN 'expired'
                                                         ELSE 'suppressed' END,
                                        'code', m.suppression_reason, 'provider', NULL,
                                        'fault', 'transient_or_unknown') END,
           m.id = ANY (p_intent_ids)
      FROM delivery_intents AS m
      LEFT JOIN jsonb_to_recordset(coalesce(p_reasons, '[]'::jsonb))
                AS r(intent_id bigint, category text, code text, provider text, fault text, status text)
             ON r.intent_id = m.id
     WHERE m.role <> 'event'
       AND m.verification_id IN (SELECT i.verification_id FROM delivery_intents AS i WHERE i.id = ANY (p_intent_ids))
$$;
