-- The intents create enqueues: one file of the outbox package's functions and views
-- (platform/catalogue.py; applied by platform/migrations.py in file-name order).

-- name: enqueue_steps
-- transition: (new) -> ready, failed
-- why: create: ready, or failed at once for a suppressed destination answered silently
-- enqueue_steps: a new verification's message intents, one per step, written by create_verification_v2
-- in its transaction (verifications/functions/30_create.sql), right after the verification (p_verification, as
-- its INSERT returned it), in step order (their ids are the steps' order: intent_step). The steps'
-- channels are the verification's (channel, fallback_channel, step3_channel); the arrays hold one
-- entry per step: a later step's own destination (step 1's is the verification's), the channel policy
-- and after_seconds each intent records (verifications' channel_policy: step 1 records step 2's), and
-- whether create found its destination suppressed. Step 1 (role 'primary') is eligible at once, every
-- later one (role 'fallback') at created_at + its after_seconds (the claim's eligibility view and the
-- signals ignore it until then), or earlier when the step before fails for good (delivery_failed).
-- A destination create found suppressed and answers silently is `failed` at once (category
-- `suppressed`, the recipient's fault), never eligible, and delivery_failed() sets off what follows
-- (the next step brought forward, the events).
CREATE OR REPLACE FUNCTION enqueue_steps(p_verification verifications, p_template_version text,
                                         p_max_attempts integer, p_destinations text[], p_policies text[],
                                         p_after_seconds integer[], p_suppressed boolean[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    channels text[] := ARRAY[p_verification.channel, p_verification.fallback_channel, p_verification.step3_channel];
    failed_ids bigint[] := '{}';
    failed_reasons jsonb;
    intent_id bigint;
    suppressed boolean;
BEGIN
    FOR step IN 1 .. cardinality(channels) LOOP
        EXIT WHEN channels[step] IS NULL;  -- the steps are contiguous: none after a missing one
        suppressed := coalesce(p_suppressed[step], false);
        INSERT INTO delivery_intents (verification_id, channel, purpose, locale, template_version, max_attempts,
                                      role, policy, after_seconds, destination, next_attempt_at, status,
                                      completed_at, failed_at, failure_category, failure_fault)
        VALUES (p_verification.id, channels[step], p_verification.purpose, p_verification.locale,
                p_template_version, p_max_attempts, CASE WHEN step = 1 THEN 'primary' ELSE 'fallback' END,
                p_policies[step], p_after_seconds[step], CASE WHEN step > 1 THEN p_destinations[step] END,
                CASE WHEN step = 1 THEN now()
                     ELSE p_verification.created_at + make_interval(secs => p_after_seconds[step]) END,
                CASE WHEN suppressed THEN 'failed' ELSE 'ready' END,
                CASE WHEN suppressed THEN now() END, CASE WHEN suppressed THEN now() END,
                CASE WHEN suppressed THEN 'suppressed' END, CASE WHEN suppressed THEN 'recipient' END)
        RETURNING id INTO intent_id;
        IF suppressed THEN
            failed_ids := failed_ids || intent_id;
        END IF;
    END LOOP;
    IF cardinality(failed_ids) > 0 THEN
        SELECT jsonb_agg(jsonb_build_object('intent_id', f, 'category', 'suppressed', 'fault', 'recipient'))
          INTO failed_reasons FROM unnest(failed_ids) AS f;
        PERFORM delivery_failed(failed_ids, failed_reasons);
    END IF;
END $$;
