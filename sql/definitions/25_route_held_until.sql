-- route_held_until: when the hold on this intent's route ends, or NULL when its route is not held
-- (sql/definitions/15 names the route). The worker leaves such an intent unsent until then
-- (delivery/sending.py): the hold stops that route and nothing else.
CREATE OR REPLACE FUNCTION route_held_until(p_intent_id bigint) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT h.held_until
      FROM delivery_routes(ARRAY[p_intent_id]) AS r
      JOIN channel_holds AS h ON h.channel = r.channel AND h.route = r.route
     WHERE h.held_until > now()
$$;
