-- Back to the session's own role: the owner of the tables grants on them (grants_privileges.sql).
RESET ROLE
