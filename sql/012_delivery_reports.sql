-- Provider delivery reports: what SendGrid's Event Webhook and Twilio's status callbacks
-- tell us after a submission was `accepted`, kept as evidence beside the attempt log.
--   delivery_intents.delivered_at         the provider's first `delivered` report (NULL: none yet)
--   delivery_intents.undeliverable_reason set when a permanent report (hard bounce, dropped, Twilio
--                                         undelivered/failed with a permanent code) failed the intent
--   delivery_observations                 append-only: one row per provider event, linked to its attempt
--   destination_suppressions              destinations that hard-bounced: create refuses them (422)
ALTER TABLE delivery_intents
    ADD COLUMN delivered_at timestamptz,
    ADD COLUMN undeliverable_reason text CHECK (length(undeliverable_reason) <= 200),
    ADD CONSTRAINT delivery_intents_undeliverable_failed
        CHECK (undeliverable_reason IS NULL OR status = 'failed');

-- One row per provider event. Never a destination, a message body or a provider's free text (a
-- bounce `reason` quotes the address): the event, its classification and its code only.
-- (provider, dedup_key) makes ingest idempotent: SendGrid's sg_event_id; Twilio's MessageSid + status.
CREATE TABLE delivery_observations (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider      text NOT NULL CHECK (provider IN ('sendgrid', 'twilio')),
    dedup_key     text NOT NULL CHECK (length(dedup_key) BETWEEN 1 AND 300),
    intent_id     bigint NOT NULL REFERENCES delivery_intents (id) ON DELETE CASCADE,
    attempt_id    text NOT NULL,
    provider_ref  text CHECK (length(provider_ref) <= 200),
    event         text NOT NULL CHECK (event ~ '^[a-z_]{1,32}$'),
    detail        text CHECK (length(detail) <= 64),    -- bounce type / classification, SMTP status
    error_code    integer,                              -- Twilio ErrorCode
    permanent     boolean NOT NULL DEFAULT false,       -- this event makes the delivery undeliverable
    provider_at   timestamptz,                          -- the provider's own timestamp
    received_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (provider, dedup_key)
);
CREATE INDEX delivery_observations_intent ON delivery_observations (intent_id, id);
CREATE INDEX delivery_observations_received ON delivery_observations (received_at);

-- Append-only like the attempt log, by the same trigger function (sql/definitions/01): only the
-- retention purge (which sets signup_verification.retention_purge) deletes, with its intent.
CREATE TRIGGER delivery_observations_append_only BEFORE UPDATE OR DELETE ON delivery_observations
    FOR EACH ROW EXECUTE FUNCTION delivery_attempts_append_only();
CREATE TRIGGER delivery_observations_no_truncate BEFORE TRUNCATE ON delivery_observations
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_attempts_append_only();

-- Linking a report by provider reference (SendGrid's X-Message-Id, Twilio's MessageSid).
CREATE INDEX delivery_attempts_provider_ref ON delivery_attempts (provider_ref) WHERE provider_ref IS NOT NULL;
-- Signals: accepted deliveries still waiting for a report, and the accepted->delivered latency.
CREATE INDEX delivery_intents_awaiting_report ON delivery_intents (channel, completed_at)
    WHERE status = 'accepted' AND delivered_at IS NULL;
CREATE INDEX delivery_intents_delivered ON delivery_intents (delivered_at) WHERE delivered_at IS NOT NULL;

-- The suppression list: the keyed digest of the canonical destination (the create_events key,
-- verifications/abuse.py), never the destination. No foreign key: it outlives the purged history.
-- expires_at NULL: until an operator clears it (`verifyctl suppression clear`).
CREATE TABLE destination_suppressions (
    channel          text NOT NULL CHECK (channel IN ('email', 'sms')),
    destination_key  bytea NOT NULL CHECK (length(destination_key) = 32),
    reason           text NOT NULL CHECK (length(reason) BETWEEN 1 AND 200),
    intent_id        bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz,
    PRIMARY KEY (channel, destination_key)
);
