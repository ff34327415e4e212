-- Message sids already explained by an attempt of ours (provider_ref): a lookup must not take an
-- earlier message to the same number (an older signup's SMS) as proof that this attempt was sent.
SELECT DISTINCT provider_ref FROM delivery_attempts WHERE provider_ref = ANY (CAST(:sids AS text[]))
