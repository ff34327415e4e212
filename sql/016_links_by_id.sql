-- An email link names its verification. The link's token is the verification id (22
-- base64url characters) followed by the 43-character token, so a confirmation finds the row by its
-- primary key and compares the keyed digest there in constant time (verifications/tokens.py,
-- confirm.py). The unique index of token digests goes: its keys are random, so every create wrote a
-- random leaf page of it, the largest share of the full-page images after a checkpoint (bench/
-- cost_bench.py), and every confirmation (a non-HOT update) another entry.
--
-- Links issued before (the 43-character token alone) keep working while they can: the rows that exist
-- now, and those created in the day after this migration, while instances of the previous release may
-- still issue or confirm old links (a rolling deploy), are `link_by_digest`: found through a partial
-- index of their digests, and sent old-style links by the dispatcher. After that day the index stops
-- growing (a later migration can drop it). A fresh database has no old links: no grace at all.
ALTER TABLE verifications ADD COLUMN link_by_digest boolean NOT NULL DEFAULT true;  -- the rows so far
ALTER TABLE verifications ALTER COLUMN link_by_digest SET DEFAULT false;
CREATE TABLE link_format (
    singleton          boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    digest_links_until timestamptz NOT NULL  -- create_verification marks rows link_by_digest until then
);
INSERT INTO link_format (digest_links_until)
SELECT CASE WHEN EXISTS (SELECT 1 FROM verifications) THEN now() + interval '1 day' ELSE '-infinity' END;

ALTER TABLE verifications DROP CONSTRAINT verifications_token_digest_key;
ALTER TABLE verifications DROP CONSTRAINT verifications_fallback_digest_key;
CREATE UNIQUE INDEX verifications_digest_links ON verifications (token_digest) WHERE link_by_digest;
CREATE UNIQUE INDEX verifications_digest_links_fallback ON verifications (fallback_digest)
    WHERE link_by_digest AND fallback_digest IS NOT NULL;
