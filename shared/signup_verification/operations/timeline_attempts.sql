-- verifyctl inspect: the attempt log of one intent, in the order it was written.
SELECT attempt_id, attempt_number, outcome, lease_owner, lease_version, error_class, error_detail,
       provider_ref, segments, claimed_at, attempted_at, observed_at
  FROM delivery_attempts
 WHERE intent_id = :intent_id
 ORDER BY id
