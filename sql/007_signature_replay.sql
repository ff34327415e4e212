-- Signed requests are accepted once: the SHA-256 of each accepted
-- Verify-Signature MAC, kept until its signature leaves the tolerance window. A table rather than
-- memory per instance: the window spans every instance of a target, and a replay goes to any of
-- them. The reconciler's reap_idempotency_keys duty deletes expired rows.
CREATE TABLE signature_replay (
    digest      bytea PRIMARY KEY CHECK (length(digest) = 32),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX signature_replay_expires ON signature_replay (expires_at);
