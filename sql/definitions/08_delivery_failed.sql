-- delivery_failed: the one place that says what follows when message intents fail for good. Called
-- by the statement that failed them (outbox/settle.sql, outbox/resolve_ambiguous.sql; provider
-- reports later), so its effects commit with the failure or not at all.
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

    RETURN written;
END $$;
