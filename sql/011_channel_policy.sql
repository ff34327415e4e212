-- Channel policy: a verification may have a fallback on the other message channel.
--   single -> one message intent (every verification so far);
--   fallback -> the primary now, the fallback at created_at + after_seconds (brought forward when the
--               primary fails for good, sql/definitions/08_delivery_failed.sql);
--   both     -> after_seconds 0: both message intents eligible at once.
-- One verification, one secret per channel: the email carries the link, the SMS the code, both derived
-- from the one nonce (verifications/tokens.py). token_digest is the primary channel's keyed digest,
-- fallback_digest the fallback channel's: never plaintext.
ALTER TABLE verifications
    ADD COLUMN fallback_channel text
        CONSTRAINT verifications_fallback_channel CHECK (fallback_channel IN ('email', 'sms') AND fallback_channel <> channel),
    ADD COLUMN fallback_digest bytea UNIQUE
        CONSTRAINT verifications_fallback_digest CHECK (length(fallback_digest) = 32),
    ADD CONSTRAINT verifications_fallback_secret CHECK ((fallback_channel IS NULL) = (fallback_digest IS NULL));

-- The intent records the policy that created it. `destination` is a fallback intent's own
-- destination (a primary reads the verification's); the redaction sweep clears both together.
-- brought_forward_at: when the primary's failure for good made this fallback due at once.
ALTER TABLE delivery_intents
    ADD COLUMN policy text NOT NULL DEFAULT 'single'
        CONSTRAINT delivery_intents_policy CHECK (policy IN ('single', 'fallback', 'both')),
    ADD COLUMN after_seconds integer
        CONSTRAINT delivery_intents_after_seconds CHECK (after_seconds >= 0),
    ADD COLUMN destination text
        CONSTRAINT delivery_intents_destination CHECK (length(destination) BETWEEN 3 AND 320),
    ADD COLUMN brought_forward_at timestamptz,
    ADD CONSTRAINT delivery_intents_policy_after CHECK ((policy = 'single') = (after_seconds IS NULL)),
    ADD CONSTRAINT delivery_intents_fallback_destination CHECK (role = 'fallback' OR destination IS NULL),
    ADD CONSTRAINT delivery_intents_brought_forward CHECK (role = 'fallback' OR brought_forward_at IS NULL);

-- A fallback destination counts against its own abuse limits: one create_events row per
-- message channel of the verification. The per-account and per-client limits count creations,
-- so they read the primary rows only.
ALTER TABLE create_events ADD COLUMN role text NOT NULL DEFAULT 'primary'
    CONSTRAINT create_events_role CHECK (role IN ('primary', 'fallback'));
ALTER TABLE create_events DROP CONSTRAINT create_events_pkey, ADD PRIMARY KEY (verification_id, role);
