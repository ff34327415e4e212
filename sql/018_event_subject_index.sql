-- migrate: no-transaction
-- One message intent per verification and channel, and one event intent per verification, event type
-- and subject: a per-delivery event (delivery.delivered, delivery.bounced) names the delivery it
-- reports (event_subject, its channel), so each delivery has its own; the verification's own events
-- have none. NULLs equal, as before; the index keeps serving every lookup by verification_id.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS delivery_intents_per_subject
    ON delivery_intents (verification_id, channel, event_type, event_subject) NULLS NOT DISTINCT;
DROP INDEX CONCURRENTLY IF EXISTS delivery_intents_per_verification;
