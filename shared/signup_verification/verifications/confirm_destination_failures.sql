-- Wrong codes typed in the last day against every verification of this one's destination
-- (the per-verification allowance resets with each new verification). The
-- destination is matched on create_events' keyed digest, on its (channel, destination_key, created_at) index.
SELECT coalesce(sum(v.confirm_failures), 0)::int AS failures
  FROM create_events AS mine
  JOIN create_events AS e
    ON e.channel = mine.channel
   AND e.destination_key = mine.destination_key
   AND e.created_at > now() - interval '1 day'
  JOIN verifications AS v ON v.id = e.verification_id
 WHERE mine.verification_id = :id
   AND mine.channel = 'sms'  -- the SMS row (a verification with a fallback has two)
