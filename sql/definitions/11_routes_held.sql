-- routes_held: whether any route of any channel is held now (the claim asks once per statement, and
-- only then reads each claimed intent's route).
CREATE OR REPLACE FUNCTION routes_held() RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM channel_holds WHERE route <> '' AND held_until > now())
$$;
