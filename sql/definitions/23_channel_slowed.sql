-- channel_slowed: a provider asked us to slow down on this channel (a 429, sql/022 channel_pacing):
-- the claim takes none of its intents until slow_until (they stay eligible: not failed, not charged).
-- STABLE: evaluated once per statement.
CREATE OR REPLACE FUNCTION channel_slowed(p_channel text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM channel_pacing WHERE channel = p_channel AND slow_until > now())
$$;
