-- The embedded server's statements (local/embedded.py): one file of the local package's named statements
-- (platform/catalogue.py).

-- name: embedded_database_exists
SELECT 1 FROM pg_database WHERE datname = :name

-- name: embedded_create_database
-- CREATE DATABASE takes no bind parameters: embedded.py fills a double-quoted identifier.
CREATE DATABASE {name}

-- name: embedded_setting
-- One server setting of the embedded server (tests turn fsync off). ALTER SYSTEM takes no bind
-- parameters: embedded.py fills a checked setting name and a quoted literal value.
ALTER SYSTEM SET {name} = {value}

-- name: embedded_reload
SELECT pg_reload_conf()
