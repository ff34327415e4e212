-- verifyctl channel resume: lift a channel's hold and start its fault run afresh. Returns whether
-- it was held (no row: the channel never had a fault).
WITH before AS (
    SELECT channel, held_until > now() AS was_held FROM channel_holds WHERE channel = :channel FOR UPDATE
)
UPDATE channel_holds AS h
   SET held_at = NULL, held_until = NULL, faults = 0, window_started_at = now()
  FROM before AS b
 WHERE h.channel = b.channel
RETURNING coalesce(b.was_held, false)
