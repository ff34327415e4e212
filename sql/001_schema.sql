-- The whole state model. Vocabulary (docs/state-model.md):
--   verification: pending -> verified | expired | superseded | locked
--   delivery intent (outbox row): ready -> claimed -> attempting -> accepted | retryable | ambiguous | failed,
--     retryable -> claimed, ambiguous -> retryable | failed, any undelivered -> suppressed.
--   accepted means the channel adapter got a positive submission result, nothing more.

CREATE TABLE verifications (
    id                 uuid PRIMARY KEY,
    account_id         text NOT NULL CHECK (length(account_id) BETWEEN 1 AND 255),
    channel            text NOT NULL CHECK (channel IN ('email', 'sms')),
    -- NULL once redacted by the evidence-retention sweep.
    destination        text CHECK (destination IS NULL OR length(destination) BETWEEN 3 AND 320),
    purpose            text NOT NULL CHECK (length(purpose) BETWEEN 1 AND 64),
    locale             text NOT NULL CHECK (length(locale) BETWEEN 2 AND 35),
    -- The token is never stored. key_id + token_nonce let the worker re-derive it with a server key
    -- that lives outside the database; token_digest (keyed HMAC) is what confirmation matches.
    key_id             text NOT NULL,
    token_nonce        bytea NOT NULL CHECK (length(token_nonce) >= 16),
    token_digest       bytea NOT NULL UNIQUE CHECK (length(token_digest) = 32),
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'verified', 'expired', 'superseded', 'locked')),
    expires_at         timestamptz NOT NULL,
    confirm_failures   integer NOT NULL DEFAULT 0 CHECK (confirm_failures >= 0),
    max_confirm_failures integer NOT NULL DEFAULT 5 CHECK (max_confirm_failures > 0),
    superseded_by      uuid REFERENCES verifications (id),
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    verified_at        timestamptz,
    redacted_at        timestamptz,
    CHECK ((status = 'verified') = (verified_at IS NOT NULL)),
    CHECK (status <> 'superseded' OR superseded_by IS NOT NULL),
    CHECK (expires_at > created_at)
);
-- Supersede: the pending verifications of one account and channel.
CREATE INDEX verifications_pending_account ON verifications (account_id, channel) WHERE status = 'pending';
-- Rate limit: recent creations per destination, case-insensitively (one inbox, one limit);
-- NULL destinations are redacted history.
CREATE INDEX verifications_destination_recent ON verifications (channel, lower(destination), created_at)
    WHERE destination IS NOT NULL;
-- Reconciler: pending verifications past expiry.
CREATE INDEX verifications_pending_expiry ON verifications (expires_at) WHERE status = 'pending';

CREATE TABLE delivery_intents (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Exactly one logical delivery per verification.
    verification_id    uuid NOT NULL UNIQUE REFERENCES verifications (id) ON DELETE CASCADE,
    channel            text NOT NULL CHECK (channel IN ('email', 'sms')),
    purpose            text NOT NULL,
    locale             text NOT NULL,
    template_version   text NOT NULL,
    status             text NOT NULL DEFAULT 'ready'
                       CHECK (status IN ('ready', 'claimed', 'attempting', 'accepted', 'retryable',
                                         'ambiguous', 'failed', 'suppressed')),
    lease_owner        text,
    lease_until        timestamptz,
    -- Fencing token: incremented by every claim; every later write must present it.
    lease_version      bigint NOT NULL DEFAULT 0,
    attempts           integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts       integer NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    ambiguous_count    integer NOT NULL DEFAULT 0 CHECK (ambiguous_count >= 0),
    next_attempt_at    timestamptz NOT NULL DEFAULT now(),
    last_error         text CHECK (length(last_error) <= 500),
    provider_ref       text,
    suppression_reason text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    last_claimed_at    timestamptz,
    completed_at       timestamptz,
    -- A lease exists exactly while a worker owns the row, and never by halves.
    CHECK ((status IN ('claimed', 'attempting')) = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
    CHECK ((status = 'suppressed') = (suppression_reason IS NOT NULL)),
    CHECK ((status IN ('accepted', 'failed', 'suppressed')) = (completed_at IS NOT NULL)),
    CHECK (attempts <= max_attempts)
);
-- The claim and the oldest-eligible signal read only the eligible set, whatever the history.
CREATE INDEX delivery_intents_eligible ON delivery_intents (next_attempt_at, id)
    WHERE status IN ('ready', 'retryable');
CREATE INDEX delivery_intents_eligible_by_channel ON delivery_intents (channel, next_attempt_at)
    WHERE status IN ('ready', 'retryable');
-- The reconciler: leases to check, ambiguous holds to resolve.
CREATE INDEX delivery_intents_leased ON delivery_intents (lease_until) WHERE status IN ('claimed', 'attempting');
CREATE INDEX delivery_intents_ambiguous ON delivery_intents (next_attempt_at) WHERE status = 'ambiguous';
-- Retention: finished history by age.
CREATE INDEX delivery_intents_completed ON delivery_intents (completed_at) WHERE completed_at IS NOT NULL;

-- The one definition of "eligible for delivery". The worker's claim and the operator signals
-- both read this view, so the chart and the queue cannot disagree.
CREATE VIEW eligible_delivery_intents AS
    SELECT * FROM delivery_intents
    WHERE status IN ('ready', 'retryable') AND next_attempt_at <= now();

-- Append-only attempt log: one row per observation of an attempt (begun, then its outcome).
-- Never a token or a destination.
CREATE TABLE delivery_attempts (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    attempt_id         text NOT NULL,             -- '<intent id>:<attempt number>', stable per attempt
    intent_id          bigint NOT NULL REFERENCES delivery_intents (id) ON DELETE CASCADE,
    attempt_number     integer NOT NULL CHECK (attempt_number > 0),
    channel            text NOT NULL,
    template_version   text NOT NULL,
    lease_owner        text,
    lease_version      bigint,
    outcome            text NOT NULL CHECK (outcome IN ('attempting', 'accepted', 'retryable',
                                                        'ambiguous', 'failed')),
    error_class        text,
    error_detail       text CHECK (length(error_detail) <= 500),
    provider_ref       text,
    segments           integer,
    claimed_at         timestamptz,
    attempted_at       timestamptz,
    observed_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (attempt_id, outcome)
);
CREATE INDEX delivery_attempts_intent ON delivery_attempts (intent_id, id);
CREATE INDEX delivery_attempts_observed ON delivery_attempts (observed_at);

-- The database refuses UPDATE, DELETE and TRUNCATE of the attempt log, except inside the
-- retention purge, which sets `SET LOCAL signup_verification.retention_purge = 'on'`.
CREATE FUNCTION delivery_attempts_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('signup_verification.retention_purge', true), '') = 'on' THEN
        RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END IF;
    RAISE EXCEPTION 'delivery_attempts is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER delivery_attempts_append_only BEFORE UPDATE OR DELETE ON delivery_attempts
    FOR EACH ROW EXECUTE FUNCTION delivery_attempts_append_only();
CREATE TRIGGER delivery_attempts_no_truncate BEFORE TRUNCATE ON delivery_attempts
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_attempts_append_only();

CREATE TABLE idempotency_keys (
    scope              text NOT NULL,
    key                text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    fingerprint        bytea NOT NULL,
    response_status    integer,
    response_body      jsonb,
    created_at         timestamptz NOT NULL DEFAULT now(),
    expires_at         timestamptz NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- Operator signals the worker and reconciler keep current (one row per name).
CREATE TABLE worker_heartbeats (
    name               text PRIMARY KEY,      -- e.g. 'dispatch:<deployment>', 'reconcile:<deployment>'
    deployment         text NOT NULL,
    last_started_at    timestamptz,
    last_completed_at  timestamptz,
    last_claim_at      timestamptz,
    watermark          jsonb NOT NULL DEFAULT '{}'::jsonb
);
