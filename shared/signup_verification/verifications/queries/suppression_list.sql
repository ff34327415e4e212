-- The operator's suppression list (operations/suppression_list.py): one file of the verifications
-- package's named statements (platform/catalogue.py).

-- name: suppression_list_entries
-- verifyctl suppression list: the entries that still block create, newest first.
SELECT channel, encode(destination_key, 'hex') AS key, reason, intent_id, created_at, expires_at,
       key_kind AS kind, category
  FROM destination_suppressions
 WHERE expires_at IS NULL OR expires_at > now()
 ORDER BY created_at DESC
 LIMIT :limit

-- name: suppression_list_clear
-- verifyctl suppression clear: the destination may be used again.
DELETE FROM destination_suppressions WHERE channel = :channel AND destination_key = :key RETURNING 1

-- name: suppression_list_clear_key
-- verifyctl suppression clear --key: the channel's entry whose key's hex digits start with :prefix
-- (the list shows the first 12; --json the whole key), removed only when it is the one entry that
-- does. Answers how many matched and how many were removed (0 or 1).
WITH matched AS (
    SELECT destination_key FROM destination_suppressions
     WHERE channel = :channel AND starts_with(encode(destination_key, 'hex'), :prefix)
), removed AS (
    DELETE FROM destination_suppressions
     WHERE channel = :channel AND destination_key IN (SELECT destination_key FROM matched)
       AND (SELECT count(*) FROM matched) = 1
    RETURNING 1
)
SELECT (SELECT count(*) FROM matched) AS matched, (SELECT count(*) FROM removed) AS removed
