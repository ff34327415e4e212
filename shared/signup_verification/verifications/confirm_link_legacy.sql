-- An old-style link (the token alone, issued before sql/016 or in its grace day): the id of its
-- verification, found by the token's keyed digest under each key of the ring (rotation order) on the
-- partial indexes of the rows that still take such links. The caller then confirms by that id.
-- the email may be the fallback channel (fallback_digest is its digest then).
SELECT id FROM verifications
 WHERE link_by_digest
   AND ((token_digest = ANY (CAST(:digests AS bytea[])) AND channel = 'email')
        OR (fallback_digest = ANY (CAST(:digests AS bytea[])) AND fallback_channel = 'email'))
 LIMIT 1
