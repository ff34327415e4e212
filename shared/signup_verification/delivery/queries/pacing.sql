-- A provider's rate limit slows its channel (delivery/pacing.py): one file of the delivery package's
-- named statements (platform/catalogue.py).

-- name: pacing_slow_down
-- A provider answered 429 for these channels: no invocation's claim takes their intents for the
-- seconds it asked (channel_slowed()). A pause already reaching further stays.
INSERT INTO channel_pacing AS p (channel, slow_until, seconds, reason)
SELECT channel, now() + make_interval(secs => seconds), seconds, reason
  FROM unnest(CAST(:channels AS text[]), CAST(:seconds AS float8[]), CAST(:reasons AS text[])) AS t(channel, seconds, reason)
ON CONFLICT (channel) DO UPDATE
   SET slow_until = greatest(p.slow_until, excluded.slow_until), seconds = excluded.seconds,
       reason = excluded.reason, slowed_at = now()
