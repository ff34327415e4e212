-- A verification takes up to three ordered steps, each on a channel of its own with its own secret.
-- Step 1 stays where the primary always was (channel, token_digest) and step 2 where the fallback
-- was (fallback_channel, fallback_digest, create_events role 'fallback', the intent of role
-- 'fallback'): rows written before keep their meaning and the previous release, while a rolling
-- deploy still runs it, writes one- and two-step verifications the same way. Step 3 gets a column
-- set of its own: step3_channel and step3_digest on the verification (confirm compares a presented
-- secret with three columns of the row it reads by primary key), create_events role 'step3' for its
-- destination's limits, step3_channel and step3_after_seconds on the idempotency record (the replayed
-- answer); its intent is a later step like the fallback (role 'fallback', its own destination).
-- Proofs: a second proof names its channel (second_proof_channel: with three secrets the other one
-- is no longer implied; NULL on rows from before, where it is the one of channel and
-- fallback_channel that verified_channel does not name), a third proof has third_proof_at.
-- Every new column is NULL on every row: its constraints are added NOT VALID, with nothing to scan.
ALTER TABLE verifications
    ADD COLUMN step3_channel text,
    ADD COLUMN step3_digest bytea,
    ADD COLUMN second_proof_channel text,
    ADD COLUMN third_proof_at timestamptz,
    ADD CONSTRAINT verifications_step3_channel CHECK (
        step3_channel IS NULL
        OR (step3_channel IN ('email', 'sms', 'whatsapp', 'voice')
            AND fallback_channel IS NOT NULL AND step3_channel <> channel AND step3_channel <> fallback_channel)) NOT VALID,
    ADD CONSTRAINT verifications_step3_secret CHECK (
        (step3_channel IS NULL) = (step3_digest IS NULL) AND (step3_digest IS NULL OR length(step3_digest) = 32)) NOT VALID,
    ADD CONSTRAINT verifications_later_proofs CHECK (
        (second_proof_channel IS NULL OR (second_proof_at IS NOT NULL AND second_proof_channel <> verified_channel
                                          AND second_proof_channel IN (channel, fallback_channel, step3_channel)))
        AND (third_proof_at IS NULL OR (second_proof_channel IS NOT NULL AND step3_channel IS NOT NULL
                                        AND third_proof_at >= second_proof_at))) NOT VALID;

ALTER TABLE idempotency_keys
    ADD COLUMN step3_channel text,
    ADD COLUMN step3_after_seconds integer;

-- The roles of create_events: a third step's destination is counted by its own limits like the
-- fallback's. Every row met the narrower constraint this one replaces.
ALTER TABLE create_events DROP CONSTRAINT create_events_role,
    ADD CONSTRAINT create_events_role CHECK (role IN ('primary', 'fallback', 'step3', 'refused')) NOT VALID;
ALTER TABLE create_events VALIDATE CONSTRAINT create_events_role;
