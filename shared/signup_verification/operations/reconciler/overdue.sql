-- Eligible intents (the shared eligibility view the claim reads) that have waited longer than the
-- polling horizon, per channel. Reads the eligible partial index: cost follows the backlog only.
SELECT channel, count(*)::integer AS overdue,
       extract(epoch FROM now() - min(next_attempt_at))::float8 AS oldest_seconds
  FROM eligible_delivery_intents
 WHERE next_attempt_at <= now() - make_interval(secs => :horizon_seconds)
 GROUP BY channel
 ORDER BY channel
