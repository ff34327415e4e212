-- suppress: an intent that has not started a send (ready, retryable, claimed, ambiguous) becomes
-- `suppressed` with a reason. Used by create (supersede), the worker (dead link found at claim)
-- and the reconciler (expired, superseded or verified verifications). It is the one write that
-- needs no lease: a dead verification is a fact whoever holds the row, and an `attempting`
-- row is left to settle first. A claimer that loses its row this way sees a stale write.
-- Webhook events (role 'event') are never suppressed: a verified, expired or locked
-- verification is exactly what they report, so they must still be delivered.
-- Changing the arguments or the result type needs `DROP FUNCTION IF EXISTS <old signature>;` first.
-- plpgsql, not sql: its body is checked when it runs, not when it is created, so this file still applies
-- to a schema from before sql/008 (role) as the upgrade tests build it.
CREATE OR REPLACE FUNCTION suppress_undelivered_intents(p_verification_ids uuid[], p_reason text)
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    UPDATE delivery_intents
       SET status = 'suppressed', suppression_reason = p_reason, lease_owner = NULL, lease_until = NULL,
           completed_at = now(), updated_at = now()
     WHERE verification_id = ANY (p_verification_ids)
       AND status IN ('ready', 'retryable', 'claimed', 'ambiguous')
       AND role <> 'event'
    RETURNING id;
END $$;
