-- Applied migrations, for the runner and `verifyctl migrate --list` (NULL table: nothing applied yet).
SELECT version, name, checksum, applied_at FROM schema_migrations
