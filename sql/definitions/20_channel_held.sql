-- channel_held: the claim takes no intent of a held channel (an account fault's hold: route '').
-- Its intents stay eligible: not failed, not charged an attempt. STABLE: evaluated once per statement.
CREATE OR REPLACE FUNCTION channel_held(p_channel text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM channel_holds WHERE channel = p_channel AND route = '' AND held_until > now())
$$;
