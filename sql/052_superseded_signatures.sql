-- The functions whose arguments or result changed under the same name, in the versions a database
-- may still hold: each definition that replaced one used to drop it before creating its own, on
-- every apply. Dropped here once instead, before the definitions are applied (they re-create every
-- current version in this same transaction). From now on a changed signature takes a new name, and
-- the migration runner drops a name no definition gives any more.
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval);
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval,
    bytea, bytea, text, bytea, integer, integer, integer, integer);
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval,
    bytea, bytea, text, bytea, integer, integer, integer, integer,
    text, text, integer, bytea, bytea, bytea, text);
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval,
    bytea, bytea, text, bytea, integer, integer, integer, integer,
    text, text, integer, bytea, bytea, bytea, text, text);
DROP FUNCTION IF EXISTS create_verification(text, text, bytea, interval, uuid, text, text, text, text, text,
    text, text, bytea, bytea, interval, integer, integer, integer, interval, interval,
    bytea, bytea, text, bytea, integer, integer, integer, integer,
    text, text, integer, bytea, bytea, bytea, text, text, bytea[], bytea[]);
DROP FUNCTION IF EXISTS delivery_failed(bigint[]);
DROP FUNCTION IF EXISTS record_event(verifications, text, jsonb);
DROP FUNCTION IF EXISTS ingest_delivery_reports(text, jsonb, interval);
DROP FUNCTION IF EXISTS ingest_delivery_reports(text, jsonb, interval, integer, interval, interval);
DROP FUNCTION IF EXISTS destination_suppression(text, bytea);
DROP FUNCTION IF EXISTS destination_suppression(text, bytea[]);
-- Same arguments, an earlier result type (CREATE OR REPLACE cannot change it): the current
-- version is dropped too and re-created by its definition right after.
DROP FUNCTION IF EXISTS report_verdicts(jsonb);
