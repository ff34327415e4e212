-- Recorded definitions (sql/definitions/NN_name.sql), keyed by name without the order number.
SELECT name, checksum, applied_at FROM schema_definitions
