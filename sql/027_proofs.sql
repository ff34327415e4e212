-- Proofs per channel: each message channel's secret proves its own destination, once (the email's link
-- the address, the SMS code the number). The first proof makes the verification verified and stays
-- where it always was: verified_at, verified_channel, verified_via. A verification with a fallback
-- has a second secret; used later, before expiry, it proves the other destination too, and
-- `second_proof_at` records when. Its channel is the one of the two (channel, fallback_channel) that
-- verified_channel does not name, its way the one that channel's secret has (an email: `link`, an SMS:
-- `code`): verifications/proofs.py lists them, the confirm statements write them.
-- The first proof costs no byte more than before; nothing is backfilled (a row verified before this
-- has its one proof where it is, and the previous release, while a rolling deploy still runs it, writes
-- the first proof the same way).
ALTER TABLE verifications
    ADD COLUMN second_proof_at timestamptz,
    -- every row has it NULL now: nothing to validate, and no scan of the table under this ALTER's lock
    ADD CONSTRAINT verifications_second_proof CHECK (
        second_proof_at IS NULL
        OR (status = 'verified' AND verified_channel IS NOT NULL AND fallback_channel IS NOT NULL
            AND second_proof_at >= verified_at)) NOT VALID;

-- The event a proof writes: `verification.proved`, one per proof, its subject the proof's channel
-- (sql/definitions/10_record_event.sql). Every row met the narrower constraint this one replaces.
ALTER TABLE delivery_intents DROP CONSTRAINT delivery_intents_event_types;
ALTER TABLE delivery_intents
    ADD CONSTRAINT delivery_intents_event_types CHECK (
        event_type IS NULL
        OR event_type IN ('verification.verified', 'verification.proved', 'verification.expired',
                          'verification.locked', 'delivery.failed', 'delivery.delivered', 'delivery.bounced'))
    NOT VALID;
