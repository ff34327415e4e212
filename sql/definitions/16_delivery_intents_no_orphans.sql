-- The attempt log has no foreign key to delivery_intents (sql/014: the RI check was a third of the
-- database CPU per intent). What it guaranteed is kept where it costs nothing on the hot path:
--   - an attempt row names an existing intent when written: every statement that appends one takes
--     the intent from its own fenced UPDATE ... RETURNING (outbox/*.sql);
--   - deleting intents never leaves their attempt rows behind: this statement-level trigger (sql/014)
--     refuses any DELETE of delivery_intents (the retention purge's cascade included) after which
--     an attempt row still names a deleted intent. It runs only when intents are deleted.
CREATE OR REPLACE FUNCTION delivery_intents_no_orphans() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- one index probe per deleted intent (a transition table has no statistics: a join could
    -- be planned as a hash over a scan of the whole log; the LIMIT keeps the LATERAL a probe)
    IF EXISTS (SELECT 1 FROM gone AS g CROSS JOIN LATERAL (SELECT 1 FROM delivery_attempts AS a
                                                            WHERE a.intent_id = g.id LIMIT 1) AS found) THEN
        RAISE EXCEPTION 'deleting delivery intents would leave their attempt rows behind; delete those in the same statement'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;
