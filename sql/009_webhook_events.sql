-- Webhook events: the event types a 'webhook' intent may carry, and their data is required.
-- New types need a new migration (the receiver's contract: docs/webhooks.md).
ALTER TABLE delivery_intents
    ADD CONSTRAINT delivery_intents_event_types CHECK (
        event_type IS NULL
        OR event_type IN ('verification.verified', 'verification.expired', 'verification.locked', 'delivery.failed')),
    ADD CONSTRAINT delivery_intents_event_payload CHECK (role <> 'event' OR payload IS NOT NULL);
