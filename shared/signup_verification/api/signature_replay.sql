-- Remember a signed request (request_signatures.replay_digest: the SHA-256 naming the request, or
-- a legacy signature's t and body, never a MAC); no row back means it was presented before (a replay).
INSERT INTO signature_replay (digest, expires_at)
VALUES (:digest, to_timestamp(:expires_at))
    ON CONFLICT (digest) DO NOTHING
RETURNING 1
