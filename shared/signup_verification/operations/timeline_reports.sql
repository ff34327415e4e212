-- verifyctl inspect: the provider reports about one verification's deliveries, in order.
SELECT o.provider, o.event, o.detail, o.error_code, o.permanent, o.attempt_id, o.provider_at, o.received_at
  FROM delivery_observations AS o
  JOIN delivery_intents AS i ON i.id = o.intent_id
 WHERE i.verification_id = :verification_id
 ORDER BY o.id
