-- An observation keeps its verdict's reason beside its category and fault: the provider's code
-- (reason_code: a Twilio ErrorCode, an SMTP status, a detection result) and the provider the reason
-- names (reason_provider: the sending one, `smtp` for mail SendGrid relayed). A final report stored
-- before its attempt settled is applied by the settle (stored_final_reports), which reads the reason
-- from the row. NULL on every row written before, and on reports that are no failure.
ALTER TABLE delivery_observations
    ADD COLUMN reason_code text CONSTRAINT delivery_observations_reason_code CHECK (length(reason_code) <= 64),
    ADD COLUMN reason_provider text
        CONSTRAINT delivery_observations_reason_provider CHECK (reason_provider ~ '^[a-z_]{1,32}$');
