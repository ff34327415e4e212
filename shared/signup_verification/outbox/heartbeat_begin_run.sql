-- Start of a reconcile run: the heartbeat row 'reconcile:<deployment>' records it; the previous
-- watermark comes back so the run can carry `covered_through` forward if it does not drain.
INSERT INTO worker_heartbeats AS h (name, deployment, last_started_at)
VALUES (:name, :deployment, now())
ON CONFLICT (name) DO UPDATE SET last_started_at = now(), deployment = EXCLUDED.deployment
RETURNING h.last_started_at AS started_at, h.watermark AS previous
