-- One migration run at a time per database (two deploys, two test workers): a session-level
-- advisory lock, held across the run's transactions. Waits under the session's statement_timeout.
SELECT pg_advisory_lock(:key)
