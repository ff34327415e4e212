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
BEGIN
    IF p_intent_ids IS NULL OR cardinality(p_intent_ids) = 0 THEN
        RETURN 0;
    END IF;
    RETURN 0;
END $$;
