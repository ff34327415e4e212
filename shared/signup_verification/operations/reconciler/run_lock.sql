-- One reconcile run at a time per deployment: a session advisory lock on the heartbeat row's name
-- (it goes with the connection if the process dies).
SELECT pg_try_advisory_lock(hashtextextended(:name, 0))
