-- delivery_failed: the one place that says what follows when message intents fail for good. Called
-- by the statement that failed them (outbox/settle.sql, outbox/resolve_ambiguous.sql,
-- outbox/resolve_lookup.sql, the delivery reports' ingest, sql/definitions/13, and create when a
-- suppressed destination is answered silently), so its effects commit with the failure or not at all.
-- p_intent_ids: the intents this statement just made `failed` (NULL or empty: nothing to do).
-- p_reasons: a JSON array with one {intent_id, category, code, provider, fault, status} per failed
-- intent (status 'undeliverable' when it was accepted first; 'failed' otherwise). The calling
-- statement's own UPDATE may not be visible here yet: these ids are treated as failed whatever
-- their rows read, with these reasons, and only other rows are written (the verification's other
-- intents, new event intents).
-- Effects:
--   * the channel policy brings a pending fallback forward when its primary failed;
--   * `delivery.bounced` (opt-in, WEBHOOK_EVENTS) for each failed delivery, with its reason;
--   * `delivery.failed` once no message channel of a pending verification is left, with every
--     delivery's reason.
-- Returns the number of rows those effects wrote. The deliveries as the site reads them:
-- message_deliveries (sql/definitions/21).
DROP FUNCTION IF EXISTS delivery_failed(bigint[]);
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

    -- The channel policy: a primary that failed for good makes its verification's waiting fallback
    -- due now (its next_attempt_at, the outbox's own schedule: the next claim takes it), recording
    -- why. Only a fallback not yet due and never tried: one already due or sent is left. Reads only
    -- the failed rows' verification_id and role, which the caller's UPDATE never changes.
    UPDATE delivery_intents AS f
       SET next_attempt_at = now(), brought_forward_at = now(), updated_at = now()
      FROM delivery_intents AS p
     WHERE p.id = ANY (p_intent_ids) AND p.role = 'primary'
       AND f.verification_id = p.verification_id AND f.role = 'fallback'
       AND f.status = 'ready' AND f.attempts = 0 AND f.next_attempt_at > now();
    GET DIAGNOSTICS n = ROW_COUNT;
    written := written + n;

    -- `delivery.bounced`: one per failed delivery (its subject is the delivery's channel).
    written := written + coalesce((
        SELECT sum(record_event(v, 'delivery.bounced',
                   jsonb_build_object('delivery', jsonb_build_object('channel', d.channel, 'role', d.role,
                                      'status', d.status, 'failed_at', d.failed_at, 'reason', d.reason)),
                   d.channel))
          FROM message_deliveries(p_intent_ids, p_reasons) AS d
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
                       jsonb_agg(jsonb_build_object('channel', d.channel, 'role', d.role, 'status', d.status,
                                                    'failed_at', d.failed_at, 'reason', d.reason)
                                 ORDER BY d.intent_id) AS deliveries,
                       bool_and(d.just_failed OR d.status IN ('failed', 'undeliverable', 'suppressed')) AS none_left,
                       bool_or(d.just_failed) AS any_failed
                  FROM message_deliveries(p_intent_ids, p_reasons) AS d
                 GROUP BY d.verification_id) AS f
          JOIN verifications AS v ON v.id = f.verification_id
         WHERE v.status = 'pending' AND f.none_left AND f.any_failed), 0);
    RETURN written;
END $$;
