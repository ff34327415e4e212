-- The ledger of signed requests accepted once (signature_replay: the HTTP edge remembers each one,
-- api/auth.py; the reconciler reaps them): one file of the platform package's named statements
-- (platform/catalogue.py).

-- name: remember_signature
-- Remember a signed request (request_signatures.replay_digest: the SHA-256 naming the request,
-- never a MAC); no row back means it was presented before (a replay).
INSERT INTO signature_replay (digest, expires_at)
VALUES (:digest, to_timestamp(:expires_at))
    ON CONFLICT (digest) DO NOTHING
RETURNING 1

-- name: reap_signatures
-- Accepted request signatures past their tolerance window (signature_replay), in a bounded batch.
WITH due AS (
    SELECT digest FROM signature_replay
     WHERE expires_at <= now()
     ORDER BY expires_at
     LIMIT :limit
)
DELETE FROM signature_replay AS s
 USING due
 WHERE s.digest = due.digest
RETURNING s.digest
