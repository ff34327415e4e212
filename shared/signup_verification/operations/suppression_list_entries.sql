-- verifyctl suppression list: the entries that still block create, newest first.
SELECT channel, encode(destination_key, 'hex') AS key, reason, intent_id, created_at, expires_at,
       key_kind AS kind, category
  FROM destination_suppressions
 WHERE expires_at IS NULL OR expires_at > now()
 ORDER BY created_at DESC
 LIMIT :limit
