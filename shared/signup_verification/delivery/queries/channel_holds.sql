-- The operator resumes a held channel (operations/channel_holds.py): one file of the delivery package's
-- named statements (platform/catalogue.py).

-- name: channel_holds_resume
-- verifyctl channel resume: lift the hold of one scope (the whole channel: route ''; or one route of
-- it) and start its fault run afresh. Returns whether it was held (no row: that scope never had a fault).
WITH before AS (
    SELECT channel, route, held_until > now() AS was_held FROM channel_holds
     WHERE channel = :channel AND route = :route
       FOR UPDATE
)
UPDATE channel_holds AS h
   SET held_at = NULL, held_until = NULL, faults = 0, attempts = 0, destinations = '{}', accounts = '{}',
       window_started_at = now()
  FROM before AS b
 WHERE h.channel = b.channel AND h.route = b.route
RETURNING coalesce(b.was_held, false)
