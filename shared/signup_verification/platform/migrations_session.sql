-- The migration session's own limits (MIGRATION_STATEMENT_TIMEOUT_MS, MIGRATION_LOCK_TIMEOUT_MS), set for
-- the session (not the transaction); returns the values they replaced so the caller can restore them.
SELECT current_setting('statement_timeout') AS statement_timeout, current_setting('lock_timeout') AS lock_timeout,
       set_config('statement_timeout', CAST(:statement_timeout AS text), false) AS new_statement_timeout,
       set_config('lock_timeout', CAST(:lock_timeout AS text), false) AS new_lock_timeout
