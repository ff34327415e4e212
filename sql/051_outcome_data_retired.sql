-- The idempotency record keeps the inputs of its 'created' answer (sql/015: typed columns, the answer
-- rebuilt by created_answer); a record written before that kept the answer itself in outcome_data,
-- which replays read. Such a record lived one IDEMPOTENCY_TTL_SECONDS (a day unless set longer): an
-- expired one is deleted (create takes an expired key as unused anyway), and one still live (a longer
-- TTL) takes its inputs from the answer it holds, so it still replays the same verification.
DELETE FROM idempotency_keys WHERE outcome_data IS NOT NULL AND expires_at <= now();
UPDATE idempotency_keys
   SET verification_id = (outcome_data ->> 'verification_id')::uuid,
       account_id = outcome_data ->> 'account_id',
       channel = outcome_data ->> 'channel',
       verification_expires_at = (outcome_data ->> 'expires_at')::timestamptz,
       fallback_channel = outcome_data -> 'fallback' ->> 'channel',
       fallback_after_seconds = (outcome_data -> 'fallback' ->> 'after_seconds')::integer
 WHERE outcome_data IS NOT NULL;
ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_created_answer,
    DROP COLUMN outcome_data,
    ADD CONSTRAINT idempotency_keys_created_answer
        CHECK (outcome IS DISTINCT FROM 'created'
               OR (verification_id IS NOT NULL AND account_id IS NOT NULL AND channel IS NOT NULL
                   AND verification_expires_at IS NOT NULL));
