-- Email links are the verification id, then the token (sql/016); the old shape, the token alone found
-- by its digest, is retired: the rows that took it (link_by_digest), the partial unique indexes of
-- their digests, and link_format, the end of the grace in which a previous release still issued it.
-- Refused while such a link can still be used: during that grace, or while a verification that took
-- it is pending and unexpired (a database that upgrades from before sql/016 in one step); the message
-- says when to migrate again. Its run changes nothing until then.
DO $$
DECLARE
    usable_until timestamptz := greatest(
        (SELECT digest_links_until FROM link_format),
        (SELECT max(expires_at) FROM verifications WHERE link_by_digest AND status = 'pending'));
BEGIN
    IF usable_until > now() THEN
        RAISE EXCEPTION 'old-style email links (the token alone) may still be used until %', usable_until
            USING HINT = 'migrate again after then: this migration retires them';
    END IF;
END $$;
DROP INDEX verifications_digest_links;
DROP INDEX verifications_digest_links_fallback;
ALTER TABLE verifications DROP COLUMN link_by_digest;
DROP TABLE link_format;
