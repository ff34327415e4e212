-- Fewer index entries per verification (bench/cost_bench.py counts them: 33 per
-- verification before this, the largest share of its WAL). Every non-HOT update writes an entry into
-- every index whose predicate the new row version meets, so an index on a hot table costs an entry
-- per insert and per status change, not per insert only. (The link digests' index: sql/016.)

-- 1. The old destination rate limit's index. The limits read create_events since sql/006 (keyed
--    digests, canonical destinations); nothing reads this one, and it took two entries per
--    verification (the insert and the confirm), with the destination in its key.
DROP INDEX verifications_destination_recent;

-- 2. The attempt log's primary key is its natural key, (intent_id, attempt_number, outcome): one
--    outcome per attempt (sql/014's unique constraint, promoted). The identity column stays (it
--    orders one intent's rows for inspect) but needs no index of its own: nothing looks a row up by
--    it, and it cost two entries per verification.
ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_pkey,
    DROP CONSTRAINT delivery_attempts_one_outcome,
    ADD CONSTRAINT delivery_attempts_pkey PRIMARY KEY (intent_id, attempt_number, outcome);

-- 3. delivery_intents loses its foreign key to verifications (its RI trigger was ~45 µs and a row
--    lock record per intent written). The insert side is guaranteed by the writers: create_verification
--    inserts the verification first in the same function, and record_event (sql/definitions/10) writes
--    an event for the verification row its caller's UPDATE ... RETURNING just locked. The delete side:
--    the purge deletes intents with their verification in one statement (operations/reconciler/
--    purge.sql), and the verifications_no_orphans trigger (sql/014, sql/definitions/16) refuses any
--    DELETE of verifications that would leave an intent behind (it did the same for create_events).
ALTER TABLE delivery_intents DROP CONSTRAINT delivery_intents_verification_id_fkey;

-- 4. The idempotency record's 'created' answer as a few typed columns instead of a ~220-byte jsonb
--    document (the keys repeated in every row): the answer is rebuilt by the same function that
--    built the first one (sql/definitions/17_created_answer.sql), so a replay still matches it byte
--    for byte. Records written before this keep their outcome_data, and replays read it.
ALTER TABLE idempotency_keys
    ADD COLUMN verification_id uuid,
    ADD COLUMN account_id text,
    ADD COLUMN channel text,
    ADD COLUMN verification_expires_at timestamptz,
    ADD COLUMN fallback_channel text,
    ADD COLUMN fallback_after_seconds integer,
    ADD CONSTRAINT idempotency_keys_created_answer
        CHECK (outcome IS DISTINCT FROM 'created' OR outcome_data IS NOT NULL
               OR (verification_id IS NOT NULL AND account_id IS NOT NULL AND channel IS NOT NULL
                   AND verification_expires_at IS NOT NULL));

-- 5. Plans that do not depend on how many rows were pending at the last ANALYZE. A partial index can
--    be read whole by any statement whose conditions imply its predicate, and when the statistics saw
--    few pending verifications the planner took that walk over the pending set for statements that
--    name one row: the create's supersede (account_id = ...) walked verifications_pending_expiry.
--    Its predicate now also needs expires_at constrained, which only the expiry sweep and the
--    confirmations do (and those name their row by primary key in a form that implies no partial
--    index: verifications/confirm_link.sql says how).
DROP INDEX verifications_pending_expiry;
CREATE INDEX verifications_pending_expiry ON verifications (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;

-- 6. The redaction sweep's index holds only what it can redact: finished verifications (it skips
--    pending ones). A verification enters it when it leaves pending (a non-HOT update that writes
--    every index anyway), not at its insert as well: one entry per verification instead of two.
--    The wrong-codes signal (operations/signals.sql) read the old one as its index of the day's
--    verifications; it reads one of its own now, holding only verifications a wrong code was typed
--    for (none in the common case: no entry at all for most verifications).
DROP INDEX verifications_unredacted;
CREATE INDEX verifications_unredacted ON verifications (created_at)
    WHERE destination IS NOT NULL AND status <> 'pending';
CREATE INDEX verifications_wrong_codes ON verifications (created_at) WHERE confirm_failures > 0;

-- 7. One eligible index, by channel: (channel, next_attempt_at, id) replaces the two on the same
--    predicate ((next_attempt_at, id) and (channel, next_attempt_at)), one entry per intent that
--    becomes eligible instead of two. The claim reads one ordered range per channel and merges them
--    (outbox/claim.sql), so no channel's backlog is ever scanned past to reach another's (an SMS
--    backlog held back by the budget no longer lies across the email claim's path).
DROP INDEX delivery_intents_eligible;
DROP INDEX delivery_intents_eligible_by_channel;
CREATE INDEX delivery_intents_eligible ON delivery_intents (channel, next_attempt_at, id)
    WHERE status IN ('ready', 'retryable');
