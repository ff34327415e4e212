-- The outbox's trigger functions: the append-only attempt log, no orphans on delete: one file of the
-- outbox package's functions and views (platform/catalogue.py; applied by platform/migrations.py in
-- file-name order).

-- name: delivery_attempts_append_only
-- The database refuses UPDATE, DELETE and TRUNCATE of the attempt log, except inside the
-- retention purge, which sets `SET LOCAL signup_verification.retention_purge = 'on'`.
-- Its triggers (delivery_attempts_append_only, delivery_attempts_no_truncate) are in sql/schema.sql;
-- delivery_observations' use it too, hence the table's name in the message.
CREATE OR REPLACE FUNCTION delivery_attempts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('signup_verification.retention_purge', true), '') = 'on' THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    RAISE EXCEPTION '% is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;

-- name: no_orphans
-- no_orphans: what three dropped foreign keys guaranteed on delete, checked only when rows are deleted
-- (dropped: their insert-time RI checks were a large share of the hot path's CPU).
--   AFTER DELETE ON delivery_intents: no attempt row may still name a deleted intent. (The insert
--     side: every statement that appends an attempt row takes the intent from its own fenced
--     UPDATE ... RETURNING, outbox/queries/*.sql, so the intent exists and is locked.)
--   AFTER DELETE ON verifications: no create_events row and no delivery intent may still name a deleted
--     verification. (The insert side: create_verification inserts both right after the verification;
--     record_event, the other writer of intents, writes for the row its caller's UPDATE just locked.)
-- The retention purge deletes those rows in the same statement (operations/queries/retention.sql:purge).
-- Statement-level with the deleted rows as a transition table: one index probe per deleted row
-- (the LATERAL ... LIMIT 1 keeps it a probe: a transition table has no statistics, and a join
-- could be planned as a hash over a scan of the whole log).
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
        IF EXISTS (SELECT 1 FROM gone AS g
                    CROSS JOIN LATERAL (SELECT 1 FROM delivery_intents AS i WHERE i.verification_id = g.id LIMIT 1) AS found) THEN
            RAISE EXCEPTION 'deleting verifications would leave their delivery intents behind; delete those in the same statement'
                USING ERRCODE = 'foreign_key_violation';
        END IF;
    END IF;
    RETURN NULL;
END $$;
