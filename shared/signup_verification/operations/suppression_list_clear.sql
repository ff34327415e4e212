-- verifyctl suppression clear: the destination may be used again.
DELETE FROM destination_suppressions WHERE channel = :channel AND destination_key = :key RETURNING 1
