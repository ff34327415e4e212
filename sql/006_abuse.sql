-- Abuse limits at create: one row per created verification with the keys its limits
-- count on. Keys that would reveal a person (the canonical destination, the number prefix, the
-- caller-supplied client network) are keyed digests (HMAC under a server key), never plaintext.
-- Each key has its own (key, created_at) index, so every limit query is an index range scan.
-- Rows go with their verification (ON DELETE CASCADE): the purge sweep needs no new duty.
CREATE TABLE create_events (
    verification_id  uuid PRIMARY KEY REFERENCES verifications (id) ON DELETE CASCADE,
    created_at       timestamptz NOT NULL DEFAULT now(),
    account_id       text NOT NULL,
    channel          text NOT NULL CHECK (channel IN ('email', 'sms')),
    destination_key  bytea NOT NULL CHECK (length(destination_key) = 32),
    prefix_key       bytea CHECK (prefix_key IS NULL OR length(prefix_key) = 32),
    country          text CHECK (country IS NULL OR country ~ '^[A-Z]{2}$'),
    client_key       bytea CHECK (client_key IS NULL OR length(client_key) = 32)
);
CREATE INDEX create_events_destination ON create_events (channel, destination_key, created_at);
CREATE INDEX create_events_account ON create_events (account_id, created_at);
CREATE INDEX create_events_prefix ON create_events (prefix_key, created_at) WHERE prefix_key IS NOT NULL;
CREATE INDEX create_events_country ON create_events (country, created_at) WHERE country IS NOT NULL;
CREATE INDEX create_events_client ON create_events (client_key, created_at) WHERE client_key IS NOT NULL;

-- The global SMS budget (SMS_MAX_PER_HOUR): an operator's `verifyctl sms resume` grants the
-- current UTC hour another budget's worth; the next hour starts from the plain budget again.
CREATE TABLE sms_budget_grants (
    hour        timestamptz PRIMARY KEY,
    extra       integer NOT NULL CHECK (extra > 0),
    granted_by  text NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now()
);
-- Counts this hour's begun SMS attempts on an index (sms_budget_left).
CREATE INDEX delivery_attempts_sms_begun ON delivery_attempts (observed_at)
    WHERE channel = 'sms' AND outcome = 'attempting';
