-- One server setting of the embedded server (tests turn fsync off). ALTER SYSTEM takes no bind
-- parameters: embedded.py fills a checked setting name and a quoted literal value.
ALTER SYSTEM SET {name} = {value}
