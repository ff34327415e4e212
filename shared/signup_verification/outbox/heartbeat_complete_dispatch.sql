-- End of a dispatch invocation (whether or not it claimed anything): last_completed_at, which
-- `verifyctl status` shows as the dispatcher's last completed run.
INSERT INTO worker_heartbeats (name, deployment, last_completed_at)
VALUES (:name, :deployment, now())
ON CONFLICT (name) DO UPDATE SET last_completed_at = now()
