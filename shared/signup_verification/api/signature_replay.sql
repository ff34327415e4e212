-- Remember an accepted signature; no row back means it was presented before (a replay).
INSERT INTO signature_replay (digest, expires_at)
VALUES (:digest, to_timestamp(:expires_at))
    ON CONFLICT (digest) DO NOTHING
RETURNING 1
