-- Membership of one IAM database user in one group role. Role names cannot be bind parameters:
-- grants.py fills both from quote_identifier (a validated name, double-quoted).
GRANT {role} TO {member}
