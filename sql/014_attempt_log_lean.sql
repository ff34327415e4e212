-- Less database work per intent, every invariant still enforced.
--
-- 1. The attempt log loses its foreign key to delivery_intents (the RI check was a third of the
--    database CPU per intent). Integrity instead: every statement that appends an attempt row
--    takes the intent id from its own fenced UPDATE ... RETURNING of that intent (claim, begin,
--    settle, release, expire_claims, lose_leases), so the intent exists and is locked when the row
--    is written; attempt rows are only written for live (non-terminal) intents, and the retention
--    purge, the only deleter of intents, deletes finished ones and their attempt rows explicitly in
--    the same statement (operations/reconciler/purge.sql). tests/integration/operations/reconciler/
--    test_attempt_orphans.py proves no orphan can be left.
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_intent_id_fkey;

-- 2. Outcome 'released': an attempt begun by the fused claim (claim.sql with begin) whose sends
--    never started (claimed ahead, then shutdown, a dead link, or a crash before the sends began).
--    Not charged: like a send never handed over, max_attempts grows by one.
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_outcome_check;
ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_outcome_check
    CHECK (outcome IN ('attempting', 'accepted', 'retryable', 'ambiguous', 'failed', 'released'));

-- 3. Only the indexes the readers use (EXPLAIN at 1M rows in bench/history_bench.py):
--    - one unique index (intent_id, attempt_number, outcome) is both the one-outcome-per-attempt
--      rule (attempt_id is '<intent>:<n>', checked below, so it says what UNIQUE (attempt_id,
--      outcome) said) and the by-intent lookup of inspect, redact, purge and settle;
--    - the signals' time window reads a BRIN index on observed_at (the log is append-only, so
--      observed_at follows the heap order): almost nothing to maintain per insert.
ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_attempt_id_shape
    CHECK (attempt_id = intent_id || ':' || attempt_number);
ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_one_outcome
    UNIQUE (intent_id, attempt_number, outcome);
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_attempt_id_outcome_key;
DROP INDEX delivery_attempts_intent;
DROP INDEX delivery_attempts_observed;
CREATE INDEX delivery_attempts_observed_brin ON delivery_attempts USING brin (observed_at);

-- 4. When the worker handed a begun attempt's sends over (outbox/start.sql). The fused claim begins
--    an attempt before the batch's turn comes; until sending_at is set, nothing can have been sent,
--    so a lost lease is a release ('released'), not an ambiguity. Not indexed, and written without
--    touching status or the lease: a HOT update when the page has room for the new version. fillfactor
--    50 leaves room for one per row (raw loop: 96 % of starts HOT, WAL 2.0 vs 2.35 KB per intent
--    against the two-step begin; at 85 only a third were HOT). The price: the heap of
--    delivery_intents takes up to twice the pages (docs/benchmarks.md).
ALTER TABLE delivery_intents ADD COLUMN sending_at timestamptz;
ALTER TABLE delivery_intents SET (fillfactor = 50);
-- Attempts in flight when this runs were begun by the old two-step begin, their sends under way.
UPDATE delivery_intents SET sending_at = updated_at WHERE status = 'attempting';

-- 5. No orphans on delete: one trigger function for both tables (sql/definitions/16_no_orphans.sql
--    keeps it current; defined here too because the triggers need it now).
CREATE OR REPLACE FUNCTION no_orphans() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- (nested IFs: each query is planned only for the table whose rows `gone` holds)
    IF TG_TABLE_NAME = 'delivery_intents' THEN
        IF EXISTS (SELECT 1 FROM gone AS g
                    CROSS JOIN LATERAL (SELECT 1 FROM delivery_attempts AS a WHERE a.intent_id = g.id LIMIT 1) AS found) THEN
            RAISE EXCEPTION 'deleting delivery intents would leave their attempt rows behind; delete those in the same statement'
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    ELSIF TG_TABLE_NAME = 'verifications' THEN
        IF EXISTS (SELECT 1 FROM gone AS g
                    CROSS JOIN LATERAL (SELECT 1 FROM create_events AS e WHERE e.verification_id = g.id LIMIT 1) AS found) THEN
            RAISE EXCEPTION 'deleting verifications would leave their create_events rows behind; delete those in the same statement'
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER delivery_intents_no_orphans AFTER DELETE ON delivery_intents
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION no_orphans();

-- 6. create_events loses its foreign key to verifications (one RI probe per create): its only writer,
--    create_verification, inserts it right after the verification in the same function. The purge
--    deletes it explicitly; the trigger refuses a verification DELETE that would orphan it.
ALTER TABLE create_events DROP CONSTRAINT create_events_verification_id_fkey;
CREATE TRIGGER verifications_no_orphans AFTER DELETE ON verifications
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION no_orphans();
-- Kept: delivery_intents.verification_id's foreign key. Intents have several writers
-- (create_verification, the fallback and webhook-event intents), so no one
-- function's statements guarantee it, and its ON DELETE CASCADE is how the purge removes intents.
