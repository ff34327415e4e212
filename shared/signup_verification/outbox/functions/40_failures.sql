-- What a step's failure for good sets off: one file of the outbox package's functions and views
-- (platform/catalogue.py; applied by platform/migrations.py in file-name order).

-- name: intent_step
-- intent_step: a message intent's step, its place among its verification's message intents (1: the
-- primary, 2: the fallback, 3: the step after it): create writes them in step order (enqueue_steps),
-- so the order of their ids is the steps'.
-- The events name a delivery by it, as the read API does (verifications/queries/read.sql:read).
CREATE OR REPLACE FUNCTION intent_step(p_verification_id uuid, p_intent_id bigint) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT count(*)::integer FROM delivery_intents
     WHERE verification_id = p_verification_id AND role <> 'event' AND id <= p_intent_id
$$;

-- name: step_deliveries
-- step_deliveries: every message delivery (each step) of the verifications the
-- failed intents belong to, as the site reads it: the failed ones with the reasons passed in, the
-- others as their rows are now (a suppressed one by why).
CREATE OR REPLACE FUNCTION step_deliveries(p_intent_ids bigint[], p_reasons jsonb)
RETURNS TABLE (verification_id uuid, intent_id bigint, step integer, channel text, role text, status text,
               failed_at text, reason jsonb, just_failed boolean)
LANGUAGE sql STABLE AS $$
    SELECT m.verification_id, m.id, intent_step(m.verification_id, m.id), m.channel, m.role,
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

-- name: delivery_failed
-- delivery_failed: the one place that says what follows when message intents fail for good. Called
-- by the statement that failed them (outbox/queries/settle.sql:settle, outbox/queries/reconcile.sql:resolve_ambiguous,
-- outbox/queries/reconcile.sql:resolve_lookup, the delivery reports' ingest_delivery_reports, and create when a
-- suppressed destination is answered silently), so its effects commit with the failure or not at all.
-- p_intent_ids: the intents this statement just made `failed` (NULL or empty: nothing to do).
-- p_reasons: a JSON array with one {intent_id, category, code, provider, fault, status} per failed
-- intent (status 'undeliverable' when it was accepted first; 'failed' otherwise). The calling
-- statement's own UPDATE may not be visible here yet: these ids are treated as failed whatever
-- their rows read, with these reasons, and only other rows are written (the verification's other
-- intents, new event intents).
-- Effects:
--   * the steps: the next waiting step is brought forward when the step before it failed;
--   * `delivery.bounced` (opt-in, WEBHOOK_EVENTS) for each failed delivery, with its reason;
--   * `delivery.failed` once no message channel of a pending verification is left, with every
--     delivery's reason.
-- Returns the number of rows those effects wrote. The deliveries as the site reads them:
-- step_deliveries.
CREATE OR REPLACE FUNCTION delivery_failed(p_intent_ids bigint[], p_reasons jsonb DEFAULT NULL) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    written integer := 0;
    n integer;
BEGIN
    IF p_intent_ids IS NULL OR cardinality(p_intent_ids) = 0 THEN
        RETURN 0;
    END IF;
    -- Serialise on the verifications (in id order: no deadlock between two callers). Two channels of
    -- one verification failing in concurrent transactions (policy `both` under two dispatchers, a
    -- bounce ingested while the SMS settles) would otherwise each still see the other as in flight,
    -- and neither would record delivery.failed. The statements below take a fresh snapshot once the
    -- lock is held, so the second one sees the first one's commit.
    PERFORM 1 FROM verifications
      WHERE id IN (SELECT verification_id FROM delivery_intents WHERE id = ANY (p_intent_ids) AND role <> 'event')
      ORDER BY id FOR UPDATE;

    -- The steps: a step that failed for good makes its verification's next waiting step due now (its
    -- next_attempt_at, the outbox's own schedule: the next claim takes it), recording why. The next
    -- waiting step is the first later step (id order is step order) not yet due and never tried with
    -- only failed steps between the two: a chain, so when step 2 fails too, step 3 comes forward,
    -- and a step already due or sent is left. Reads only the failed rows' verification_id and id,
    -- which the caller's UPDATE never changes (the steps between are read as they are now, those
    -- failed here counted as failed).
    UPDATE delivery_intents AS f
       SET next_attempt_at = now(), brought_forward_at = now(), updated_at = now()
      FROM delivery_intents AS p
     WHERE p.id = ANY (p_intent_ids) AND p.role <> 'event'
       AND f.verification_id = p.verification_id AND f.role = 'fallback' AND f.id > p.id
       AND f.status = 'ready' AND f.attempts = 0 AND f.next_attempt_at > now()
       AND NOT EXISTS (SELECT 1 FROM delivery_intents AS b
                        WHERE b.verification_id = p.verification_id AND b.role <> 'event'
                          AND b.id > p.id AND b.id < f.id
                          AND b.status <> 'failed' AND NOT b.id = ANY (p_intent_ids));
    GET DIAGNOSTICS n = ROW_COUNT;
    written := written + n;

    -- `delivery.bounced`: one per failed delivery (its subject is the delivery's channel).
    written := written + coalesce((
        SELECT sum(record_event(v, 'delivery.bounced',
                   jsonb_build_object('delivery', jsonb_build_object('step', d.step, 'channel', d.channel, 'role', d.role,
                                      'status', d.status, 'failed_at', d.failed_at, 'reason', d.reason)),
                   d.channel))
          FROM step_deliveries(p_intent_ids, p_reasons) AS d
          JOIN verifications AS v ON v.id = d.verification_id
         WHERE d.just_failed), 0);

    -- `delivery.failed` for each pending verification one of whose message intents (primary or
    -- fallback; a failed webhook event is not a delivery) failed here and none of whose message
    -- intents is left: every other one is failed or suppressed too. Reads the other intents as
    -- they are now (a fallback just brought forward above is left, so no event yet).
    written := written + coalesce((
        SELECT sum(record_event(v, 'delivery.failed', jsonb_build_object(
                   'failed_channels', (SELECT jsonb_agg(DISTINCT d.channel) FROM jsonb_to_recordset(f.deliveries)
                                           AS d(channel text)),
                   'deliveries', f.deliveries)))
          FROM (SELECT d.verification_id,
                       jsonb_agg(jsonb_build_object('step', d.step, 'channel', d.channel, 'role', d.role, 'status', d.status,
                                                    'failed_at', d.failed_at, 'reason', d.reason)
                                 ORDER BY d.intent_id) AS deliveries,
                       bool_and(d.just_failed OR d.status IN ('failed', 'undeliverable', 'suppressed')) AS none_left,
                       bool_or(d.just_failed) AS any_failed
                  FROM step_deliveries(p_intent_ids, p_reasons) AS d
                 GROUP BY d.verification_id) AS f
          JOIN verifications AS v ON v.id = f.verification_id
         WHERE v.status = 'pending' AND f.none_left AND f.any_failed), 0);
    RETURN written;
END $$;
