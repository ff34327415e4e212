-- A verification may own several delivery intents, all through the one outbox:
--   role 'primary'  -> the message of the verification's own channel (every intent so far);
--   role 'fallback' -> the other message channel under the verification's channel policy;
--   role 'event'    -> a webhook event to the signup site: channel 'webhook', event_type set,
--                      payload = the JSON body's data (never a token, code or full destination).
-- One message intent per verification and channel, one event intent per verification and event type:
-- one unique index over (verification_id, channel, event_type) with NULLs equal says both, and keeps
-- serving every lookup by verification_id (suppress, redact, purge, inspect) as the old UNIQUE did.
ALTER TABLE delivery_intents DROP CONSTRAINT delivery_intents_verification_id_key;
ALTER TABLE delivery_intents DROP CONSTRAINT delivery_intents_channel_check;
ALTER TABLE delivery_intents
    ADD CONSTRAINT delivery_intents_channel_check CHECK (channel IN ('email', 'sms', 'webhook')),
    ADD COLUMN role text NOT NULL DEFAULT 'primary'
        CONSTRAINT delivery_intents_role_check CHECK (role IN ('primary', 'fallback', 'event')),
    ADD COLUMN event_type text,
    ADD COLUMN payload jsonb,
    ADD CONSTRAINT delivery_intents_event_channel CHECK ((channel = 'webhook') = (role = 'event')),
    ADD CONSTRAINT delivery_intents_event_type CHECK ((role = 'event') = (event_type IS NOT NULL));
CREATE UNIQUE INDEX delivery_intents_per_verification
    ON delivery_intents (verification_id, channel, event_type) NULLS NOT DISTINCT;
