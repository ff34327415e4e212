-- Create (verifications/create.py): one file of the verifications package's named statements
-- (platform/catalogue.py).

-- name: create
-- One round trip: the whole create (idempotency, rate and abuse limits, the suppression list,
-- supersede, outbox rows) is the SQL function create_verification_v2.
SELECT outcome, verification, retry_after FROM create_verification_v2(
    :scope, :key, :fingerprint, make_interval(secs => :idem_ttl),
    :id, :account_id, :channel, :destination, :purpose, :locale,
    :template_version, :key_id, :nonce, :digest,
    make_interval(secs => :ttl), :max_confirm, :max_attempts,
    :rate_limit, interval '1 hour', make_interval(secs => :spacing),
    :destination_key, :prefix_key, :country, :client_key,
    :per_account, :per_prefix, :per_country, :per_client,
    -- the channel policy: all NULL without a fallback
    :fallback_channel, :fallback_destination, CAST(:fallback_after AS integer), :fallback_digest,
    :fallback_destination_key, :fallback_prefix_key, :fallback_country,
    :return_url,
    -- the suppression list: exact and alias keys under every key of the ring; the exact keys kept
    CAST(:suppression_keys AS bytea[]), CAST(:fallback_suppression_keys AS bytea[]),
    CAST(:alias_suppression_keys AS bytea[]), CAST(:fallback_alias_suppression_keys AS bytea[]),
    CAST(:exact_key AS bytea), CAST(:fallback_exact_key AS bytea), :suppressed_answer,
    -- step 3: all NULL without one
    :step3_channel, :step3_destination, CAST(:step3_after AS integer), CAST(:step3_digest AS bytea),
    CAST(:step3_destination_key AS bytea), CAST(:step3_prefix_key AS bytea), :step3_country,
    CAST(:step3_suppression_keys AS bytea[]), CAST(:step3_alias_suppression_keys AS bytea[]),
    CAST(:step3_exact_key AS bytea))
