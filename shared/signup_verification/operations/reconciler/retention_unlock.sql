-- Inside a retention batch's transaction only: the one way past the attempt log's append-only
-- trigger (redact scrubs error texts, purge deletes whole histories).
SET LOCAL signup_verification.retention_purge = 'on'
