-- delivery_route: the route of one message intent, the unit a route fault may hold
-- (delivery/classification/, sql/definitions/26, outbox/claim.sql). An SMS intent's route is its
-- destination's ISO country as create recorded it (create_events.country, from the number's
-- numbering plan: verifications/abuse.py); an email intent's is the receiving domain of its address,
-- lower-cased. Never a whole destination. A webhook event, a redacted address or an intent without
-- its create record has none (NULL): its faults hold nothing.
-- With the route: the destination's keyed digest (create_events' exact key, as the suppression
-- list's) and a hash of the account, which tell a run's distinct destinations and accounts apart.
-- One intent per call, so that it inlines into the caller as three primary-key probes (callers put
-- it in a LATERAL subquery with OFFSET 0: never a join over the whole table).
CREATE OR REPLACE FUNCTION delivery_route(p_intent_id bigint)
RETURNS TABLE (intent_id bigint, channel text, route text, destination_key bytea, account_key bigint)
LANGUAGE sql STABLE AS $$
    SELECT i.id, i.channel,
           CASE WHEN i.channel = 'sms' THEN ce.country
                WHEN strpos(d.address, '@') > 0 THEN nullif(lower(split_part(d.address, '@', -1)), '')
           END,
           coalesce(ce.exact_key, ce.destination_key),
           hashtextextended(v.account_id, 0)
      FROM delivery_intents AS i
      JOIN verifications AS v ON v.id = i.verification_id
     CROSS JOIN LATERAL (SELECT CASE WHEN i.role = 'fallback' THEN i.destination ELSE v.destination END AS address) AS d
      LEFT JOIN create_events AS ce
        ON ce.verification_id = i.verification_id AND ce.channel = i.channel
       AND ce.role = CASE WHEN i.role = 'fallback' THEN 'fallback' ELSE 'primary' END
     WHERE i.id = p_intent_id AND i.channel IN ('email', 'sms') AND i.role <> 'event'
$$;
