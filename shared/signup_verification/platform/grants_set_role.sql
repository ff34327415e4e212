-- Act as the role that manages roles until RESET ROLE or the end of the transaction. The name
-- comes from grants_admin.sql, through grants.quote_identifier (role names cannot be parameters).
SET LOCAL ROLE {role}
