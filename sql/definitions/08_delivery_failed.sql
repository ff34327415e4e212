-- delivery_failed: the one place that says what follows when message intents fail for good. Called
-- by the statement that failed them (outbox/settle.sql, outbox/resolve_ambiguous.sql, outbox/resolve_lookup.sql,
-- the delivery reports' ingest, sql/definitions/13), so its effects commit with the failure or not at all.
-- p_intent_ids: the intents this statement just made `failed` (NULL or empty: nothing to do). The
-- calling statement's own UPDATE may not be visible here yet: treat these ids as failed whatever
-- their rows read, and only write other rows (the verification's other intents, new event intents).
-- Effects, added by the issues that own them: the channel policy brings a pending fallback forward
-- (issue 14); the `delivery.failed` webhook event once no message channel of the verification is
-- left (issue 12). Returns the number of rows those effects wrote.
CREATE OR REPLACE FUNCTION delivery_failed(p_intent_ids bigint[]) RETURNS integer
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

    -- issue 14: the channel policy. A primary that failed for good makes its verification's waiting
    -- fallback due now (its next_attempt_at, the outbox's own schedule: the next claim takes it),
    -- recording why. Only a fallback not yet due and never tried: one already due or sent is left.
    -- Reads only the failed rows' verification_id and role, which the caller's UPDATE never changes.
    UPDATE delivery_intents AS f
       SET next_attempt_at = now(), brought_forward_at = now(), updated_at = now()
      FROM delivery_intents AS p
     WHERE p.id = ANY (p_intent_ids) AND p.role = 'primary'
       AND f.verification_id = p.verification_id AND f.role = 'fallback'
       AND f.status = 'ready' AND f.attempts = 0 AND f.next_attempt_at > now();
    GET DIAGNOSTICS n = ROW_COUNT;
    written := written + n;
    -- end of issue 14

    -- issue 12: `delivery.failed` for each pending verification one of whose message intents
    -- (primary or fallback; a failed webhook event is not a delivery) failed here and none of whose
    -- message intents is left: every other one is failed or suppressed too. Reads the other intents
    -- as they are now (the issue 14 block above may have just brought a fallback forward: it is left, so no event yet).
    written := written + coalesce((
        SELECT sum(record_event(v, 'delivery.failed', jsonb_build_object('failed_channels',
                   (SELECT jsonb_agg(DISTINCT m.channel) FROM delivery_intents AS m
                     WHERE m.verification_id = v.id AND m.role <> 'event'))))
          FROM (SELECT DISTINCT i.verification_id FROM delivery_intents AS i
                 WHERE i.id = ANY (p_intent_ids) AND i.role <> 'event') AS f
          JOIN verifications AS v ON v.id = f.verification_id
         WHERE v.status = 'pending'
           AND NOT EXISTS (SELECT 1 FROM delivery_intents AS o
                            WHERE o.verification_id = f.verification_id AND o.role <> 'event'
                              AND NOT (o.id = ANY (p_intent_ids))
                              AND o.status NOT IN ('failed', 'suppressed'))), 0);
    RETURN written;
END $$;
