-- The database refuses UPDATE, DELETE and TRUNCATE of the attempt log, except inside the
-- retention purge, which sets `SET LOCAL signup_verification.retention_purge = 'on'`.
-- Its triggers (delivery_attempts_append_only, delivery_attempts_no_truncate) live in sql/001_schema.sql;
-- delivery_observations (sql/012) uses it too, hence the table's name in the message.
CREATE OR REPLACE FUNCTION delivery_attempts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('signup_verification.retention_purge', true), '') = 'on' THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    RAISE EXCEPTION '% is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
