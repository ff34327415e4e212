-- The whole schema as a migrated database has it, in the present tense: every table, constraint,
-- index and trigger. Read it to learn the schema; the numbered migrations beside it are how a database
-- got here, and are never edited (sql/README.md). The functions and views are each owning package's
-- functions/ (shared/signup_verification/<owner>/functions/*.sql), which the runner applies after the
-- migrations. tests/integration/platform/test_schema_file.py builds a database from this file and those
-- and holds it equal to a migrated one (pg_dump --schema-only of both): a migration that changes the
-- schema changes this file in the same commit.
--
-- Two sections, because the triggers call functions and the functions read tables: `tables`, then
-- the functions/ definitions, then `triggers`.
--
-- Owners (the package whose catalogue writes the table): verifications, idempotency_keys,
-- create_events, destination_suppressions: verifications; delivery_intents, delivery_attempts,
-- worker_heartbeats, sms_budget_grants, voice_budget_grants: outbox; delivery_observations, channel_holds, channel_pacing,
-- dispatch_invocations: delivery; schema_migrations, schema_definitions, signature_replay: platform.
-- Vocabulary: docs/state-model.md.

-- name: tables

-- == platform ======================================================================================

-- The migration runner's bookkeeping: one row per applied migration (its file's checksum refuses a
-- later edit), and one per definition (the functions/ sections), keyed by the object it creates.
CREATE TABLE schema_migrations (
    version     text PRIMARY KEY,
    name        text NOT NULL,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE schema_definitions (
    name        text PRIMARY KEY,
    checksum    text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Signed requests are accepted once: the SHA-256 naming each accepted request, kept until its
-- signature leaves the tolerance window. A table, not memory per instance: a replay may reach any
-- instance of a target. The reconciler's reap_idempotency_keys duty deletes expired rows.
CREATE TABLE signature_replay (
    digest      bytea PRIMARY KEY CHECK (length(digest) = 32),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX signature_replay_expires ON signature_replay (expires_at);

-- == verifications =================================================================================

-- A verification owns the secrets and their proofs: pending -> verified | expired | superseded | locked.
-- The secrets are never stored: key_id + token_nonce let the worker derive them again with a server key
-- that lives outside the database. Its steps, each on a channel of its own with its own secret (keyed
-- HMAC digest): step 1 channel / token_digest, step 2 (the fallback) fallback_channel /
-- fallback_digest, step 3 step3_channel / step3_digest; a later step's destination is its intent's.
-- The first proof is verified_at / verified_channel / verified_via, a later one another step's secret:
-- second_proof_at / second_proof_channel (NULL on rows from before three steps: the other of channel
-- and fallback_channel), then third_proof_at (the one step left).
-- destination is NULL once the retention sweep redacted it.
CREATE TABLE verifications (
    id                   uuid CONSTRAINT verifications_pkey PRIMARY KEY,
    account_id           text NOT NULL CHECK (length(account_id) BETWEEN 1 AND 255),
    channel              text NOT NULL CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice')),
    destination          text CHECK (destination IS NULL OR length(destination) BETWEEN 3 AND 320),
    purpose              text NOT NULL CHECK (length(purpose) BETWEEN 1 AND 64),
    locale               text NOT NULL CHECK (length(locale) BETWEEN 2 AND 35),
    key_id               text NOT NULL,
    token_nonce          bytea NOT NULL CHECK (length(token_nonce) >= 16),
    token_digest         bytea NOT NULL CHECK (length(token_digest) = 32),
    status               text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'verified', 'expired', 'superseded', 'locked')),
    expires_at           timestamptz NOT NULL,
    confirm_failures     integer NOT NULL DEFAULT 0 CHECK (confirm_failures >= 0),
    max_confirm_failures integer NOT NULL DEFAULT 5 CHECK (max_confirm_failures > 0),
    superseded_by        uuid REFERENCES verifications (id),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    verified_at          timestamptz,
    redacted_at          timestamptz,
    -- where the pages send the person back to: checked at create against RETURN_URL_ALLOWED_ORIGINS
    return_url           text CONSTRAINT verifications_return_url_length
                         CHECK (return_url IS NULL OR length(return_url) BETWEEN 8 AND 2048),
    fallback_channel     text CONSTRAINT verifications_fallback_channel
                         CHECK (fallback_channel IN ('email', 'sms', 'whatsapp', 'voice') AND fallback_channel <> channel),
    fallback_digest      bytea CONSTRAINT verifications_fallback_digest CHECK (length(fallback_digest) = 32),
    verified_channel     text CONSTRAINT verifications_verified_channel CHECK (verified_channel IN ('email', 'sms', 'whatsapp', 'voice')),
    verified_via         text CONSTRAINT verifications_verified_via CHECK (verified_via IN ('link', 'code')),
    second_proof_at      timestamptz,
    step3_channel        text,
    step3_digest         bytea,
    second_proof_channel text,
    third_proof_at       timestamptz,
    CONSTRAINT verifications_check CHECK ((status = 'verified') = (verified_at IS NOT NULL)),
    CONSTRAINT verifications_check1 CHECK (status <> 'superseded' OR superseded_by IS NOT NULL),
    CONSTRAINT verifications_check2 CHECK (expires_at > created_at),
    CONSTRAINT verifications_fallback_secret CHECK ((fallback_channel IS NULL) = (fallback_digest IS NULL)),
    CONSTRAINT verifications_proof CHECK (
        (verified_channel IS NULL) = (verified_via IS NULL)
        AND (verified_via IS NULL OR (verified_via = 'link') = (verified_channel = 'email'))
        AND (verified_channel IS NULL OR status = 'verified'))
);
-- Added NOT VALID (no scan of a deployed table under the migration's lock); every row meets it.
ALTER TABLE verifications ADD CONSTRAINT verifications_second_proof CHECK (
    second_proof_at IS NULL
    OR (status = 'verified' AND verified_channel IS NOT NULL AND fallback_channel IS NOT NULL
        AND second_proof_at >= verified_at)) NOT VALID;
-- Added NOT VALID with their columns (every row had them NULL); every row meets them.
ALTER TABLE verifications ADD CONSTRAINT verifications_step3_channel CHECK (
    step3_channel IS NULL
    OR (step3_channel IN ('email', 'sms', 'whatsapp', 'voice')
        AND fallback_channel IS NOT NULL AND step3_channel <> channel AND step3_channel <> fallback_channel)) NOT VALID;
ALTER TABLE verifications ADD CONSTRAINT verifications_step3_secret CHECK (
    (step3_channel IS NULL) = (step3_digest IS NULL) AND (step3_digest IS NULL OR length(step3_digest) = 32)) NOT VALID;
ALTER TABLE verifications ADD CONSTRAINT verifications_later_proofs CHECK (
    (second_proof_channel IS NULL OR (second_proof_at IS NOT NULL AND second_proof_channel <> verified_channel
                                      AND second_proof_channel IN (channel, fallback_channel, step3_channel)))
    AND (third_proof_at IS NULL OR (second_proof_channel IS NOT NULL AND step3_channel IS NOT NULL
                                    AND third_proof_at >= second_proof_at))) NOT VALID;
-- Supersede: the pending verifications of one account.
CREATE INDEX verifications_pending_account ON verifications (account_id, channel) WHERE status = 'pending';
-- The expiry sweep: pending verifications past expiry. Its predicate names expires_at so that only
-- statements constraining it may read the index whole (a statement naming one row never walks it).
CREATE INDEX verifications_pending_expiry ON verifications (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;
-- Redaction candidates: finished verifications that still hold a destination, oldest first.
CREATE INDEX verifications_unredacted ON verifications (created_at)
    WHERE destination IS NOT NULL AND status <> 'pending';
-- Deleting a verification checks that no other one names it in superseded_by.
CREATE INDEX verifications_superseded_by ON verifications (superseded_by) WHERE superseded_by IS NOT NULL;
-- The wrong-codes signal: only verifications a wrong code was typed for.
CREATE INDEX verifications_wrong_codes ON verifications (created_at) WHERE confirm_failures > 0;

-- The idempotency record of a create: one request per (scope, key), its first answer's inputs for a
-- 'created' outcome (created_answer rebuilds the answer from them); only 'created' is ever stored.
CREATE TABLE idempotency_keys (
    scope                   text NOT NULL,
    key                     text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
    fingerprint             bytea NOT NULL,
    created_at              timestamptz NOT NULL DEFAULT now(),
    expires_at              timestamptz NOT NULL,
    outcome                 text,
    verification_id         uuid,
    account_id              text,
    channel                 text,
    verification_expires_at timestamptz,
    fallback_channel        text,
    fallback_after_seconds  integer,
    step3_channel           text,
    step3_after_seconds     integer,
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (scope, key),
    CONSTRAINT idempotency_keys_created_answer
        CHECK (outcome IS DISTINCT FROM 'created'
               OR (verification_id IS NOT NULL AND account_id IS NOT NULL AND channel IS NOT NULL
                   AND verification_expires_at IS NOT NULL))
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

-- The abuse limits at create: one row per step of a created verification (role primary, fallback:
-- step 2, step3), each on its own channel, with the keys its limits count on, and one per create refused with an answer about someone
-- else (role refused: the caller's keys only). Keys that would reveal a person are keyed digests
-- (HMAC under a server key): destination_key the canonical, alias-folding one the limits count,
-- exact_key the exact address where it differs (the suppression list's). No foreign key: create
-- writes it right after the verification, and no_orphans refuses a verification deleted without it.
CREATE TABLE create_events (
    verification_id  uuid NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    account_id       text NOT NULL,
    channel          text NOT NULL CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice')),
    destination_key  bytea CHECK (length(destination_key) = 32),
    prefix_key       bytea CHECK (prefix_key IS NULL OR length(prefix_key) = 32),
    country          text CHECK (country IS NULL OR country ~ '^[A-Z]{2}$'),
    client_key       bytea CHECK (client_key IS NULL OR length(client_key) = 32),
    role             text NOT NULL DEFAULT 'primary'
                     CONSTRAINT create_events_role CHECK (role IN ('primary', 'fallback', 'step3', 'refused')),
    exact_key        bytea CONSTRAINT create_events_exact_key CHECK (length(exact_key) = 32),
    CONSTRAINT create_events_pkey PRIMARY KEY (verification_id, role),
    CONSTRAINT create_events_refused_keys CHECK ((role = 'refused') = (destination_key IS NULL)
                                                 AND (role <> 'refused' OR (prefix_key IS NULL AND country IS NULL
                                                                            AND exact_key IS NULL)))
);
-- Each key has its own (key, created_at) index: every limit is an index range scan.
CREATE INDEX create_events_destination ON create_events (channel, destination_key, created_at);
CREATE INDEX create_events_account ON create_events (account_id, created_at);
CREATE INDEX create_events_prefix ON create_events (prefix_key, created_at) WHERE prefix_key IS NOT NULL;
CREATE INDEX create_events_country ON create_events (country, created_at) WHERE country IS NOT NULL;
CREATE INDEX create_events_client ON create_events (client_key, created_at) WHERE client_key IS NOT NULL;
-- The reconciler's reap_refused_creates duty.
CREATE INDEX create_events_refused ON create_events (created_at) WHERE role = 'refused';

-- The suppression list: destinations whose delivery failed for the recipient's fault, refused by
-- create, by the keyed digest of the exact address (key_kind 'exact'); entries from before exact keys
-- are alias-keyed (key_kind 'alias') until they expire. No foreign key: it outlives the purged history.
-- expires_at NULL: until an operator clears it.
CREATE TABLE destination_suppressions (
    channel          text NOT NULL CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice')),
    destination_key  bytea NOT NULL CHECK (length(destination_key) = 32),
    reason           text NOT NULL CHECK (length(reason) BETWEEN 1 AND 200),
    intent_id        bigint,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz,
    key_kind         text NOT NULL DEFAULT 'exact'
                     CONSTRAINT destination_suppressions_key_kind CHECK (key_kind IN ('exact', 'alias')),
    category         text CONSTRAINT destination_suppressions_category CHECK (category ~ '^[a-z_]{1,32}$'),
    CONSTRAINT destination_suppressions_pkey PRIMARY KEY (channel, destination_key)
);

-- == outbox ========================================================================================

-- A delivery intent (the outbox row) owns delivery: one message intent per step of the verification,
-- the primary (step 1) on the verification's channel, each later step (role 'fallback': steps 2 and 3,
-- in id order) on its own channel (policy, after_seconds, its own destination), and webhook
-- events (channel 'webhook', role 'event': event_type, event_subject, payload). Status:
-- ready -> claimed -> attempting -> accepted | retryable | ambiguous | failed, any undelivered ->
-- suppressed (outbox/states.py; the transitions are the outbox's catalogue). A lease exists exactly
-- while a worker owns the row; lease_version is the fencing token every later write presents.
-- sending_at: the begun attempt's send was handed over (until then a lost lease is a release).
-- fillfactor 50 leaves room on the page for the start's HOT update of sending_at.
-- No foreign key to verifications: its writers insert right after the verification or for a row their
-- statement locked, and no_orphans refuses a verification deleted without its intents.
CREATE TABLE delivery_intents (
    id                   bigint GENERATED ALWAYS AS IDENTITY CONSTRAINT delivery_intents_pkey PRIMARY KEY,
    verification_id      uuid NOT NULL,
    channel              text NOT NULL CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice', 'webhook')),
    purpose              text NOT NULL,
    locale               text NOT NULL,
    template_version     text NOT NULL,
    status               text NOT NULL DEFAULT 'ready'
                         CHECK (status IN ('ready', 'claimed', 'attempting', 'accepted', 'retryable',
                                           'ambiguous', 'failed', 'suppressed')),
    lease_owner          text,
    lease_until          timestamptz,
    lease_version        bigint NOT NULL DEFAULT 0,
    attempts             integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts         integer NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    ambiguous_count      integer NOT NULL DEFAULT 0 CHECK (ambiguous_count >= 0),
    next_attempt_at      timestamptz NOT NULL DEFAULT now(),
    last_error           text CHECK (length(last_error) <= 500),
    provider_ref         text,
    suppression_reason   text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    last_claimed_at      timestamptz,
    completed_at         timestamptz,
    role                 text NOT NULL DEFAULT 'primary' CHECK (role IN ('primary', 'fallback', 'event')),
    event_type           text,
    payload              jsonb,
    policy               text NOT NULL DEFAULT 'single'
                         CONSTRAINT delivery_intents_policy CHECK (policy IN ('single', 'fallback', 'both')),
    after_seconds        integer CONSTRAINT delivery_intents_after_seconds CHECK (after_seconds >= 0),
    destination          text CONSTRAINT delivery_intents_destination CHECK (length(destination) BETWEEN 3 AND 320),
    brought_forward_at   timestamptz,
    -- what providers reported after `accepted` (delivery_observations)
    delivered_at         timestamptz,
    undeliverable_reason text CHECK (length(undeliverable_reason) <= 200),
    sending_at           timestamptz,
    -- a failure for good, answered twice: its category, code and provider, and whose fault it was
    failed_at            timestamptz,
    failure_category     text CONSTRAINT delivery_intents_failure_category CHECK (failure_category ~ '^[a-z_]{1,32}$'),
    failure_code         text CONSTRAINT delivery_intents_failure_code CHECK (length(failure_code) BETWEEN 1 AND 64),
    failure_provider     text CONSTRAINT delivery_intents_failure_provider CHECK (failure_provider ~ '^[a-z]{1,16}$'),
    failure_fault        text CONSTRAINT delivery_intents_failure_fault
                         CHECK (failure_fault IN ('recipient', 'sender_or_account', 'transient_or_unknown')),
    event_subject        text CONSTRAINT delivery_intents_event_subject CHECK (event_subject IN ('email', 'sms', 'whatsapp', 'voice')),
    CONSTRAINT delivery_intents_check CHECK ((status IN ('claimed', 'attempting'))
                                             = (lease_owner IS NOT NULL AND lease_until IS NOT NULL)),
    CONSTRAINT delivery_intents_check1 CHECK ((lease_owner IS NULL) = (lease_until IS NULL)),
    CONSTRAINT delivery_intents_check2 CHECK ((status = 'suppressed') = (suppression_reason IS NOT NULL)),
    CONSTRAINT delivery_intents_check3 CHECK ((status IN ('accepted', 'failed', 'suppressed')) = (completed_at IS NOT NULL)),
    CONSTRAINT delivery_intents_check4 CHECK (attempts <= max_attempts),
    CONSTRAINT delivery_intents_event_channel CHECK ((channel = 'webhook') = (role = 'event')),
    CONSTRAINT delivery_intents_event_type CHECK ((role = 'event') = (event_type IS NOT NULL)),
    CONSTRAINT delivery_intents_event_payload CHECK (role <> 'event' OR payload IS NOT NULL),
    CONSTRAINT delivery_intents_subject_event CHECK (event_subject IS NULL OR role = 'event'),
    CONSTRAINT delivery_intents_policy_after CHECK ((policy = 'single') = (after_seconds IS NULL)),
    CONSTRAINT delivery_intents_fallback_destination CHECK (role = 'fallback' OR destination IS NULL),
    CONSTRAINT delivery_intents_brought_forward CHECK (role = 'fallback' OR brought_forward_at IS NULL),
    CONSTRAINT delivery_intents_undeliverable_failed CHECK (undeliverable_reason IS NULL OR status = 'failed'),
    CONSTRAINT delivery_intents_failure_failed CHECK (
        (failure_category IS NULL OR status = 'failed') AND (failed_at IS NULL OR status = 'failed'))
) WITH (fillfactor = 50);
-- The event types a site may ask for (the receiver's contract: docs/webhooks.md). Added NOT VALID
-- (no scan of a deployed table under the migration's lock); every row meets it.
ALTER TABLE delivery_intents ADD CONSTRAINT delivery_intents_event_types CHECK (
    event_type IS NULL
    OR event_type IN ('verification.verified', 'verification.proved', 'verification.expired',
                      'verification.locked', 'delivery.failed', 'delivery.delivered', 'delivery.bounced')) NOT VALID;
-- One message intent per verification and channel, one event intent per verification, type and
-- subject (NULLs equal); it serves every lookup by verification_id too.
CREATE UNIQUE INDEX delivery_intents_per_subject
    ON delivery_intents (verification_id, channel, event_type, event_subject) NULLS NOT DISTINCT;
-- The claim and the signals read only the eligible set, one ordered range per channel.
CREATE INDEX delivery_intents_eligible ON delivery_intents (channel, next_attempt_at, id)
    WHERE status IN ('ready', 'retryable');
-- The reconciler: leases to check, ambiguous holds to resolve.
CREATE INDEX delivery_intents_leased ON delivery_intents (lease_until) WHERE status IN ('claimed', 'attempting');
CREATE INDEX delivery_intents_ambiguous ON delivery_intents (next_attempt_at) WHERE status = 'ambiguous';
-- Retention: finished history by age.
CREATE INDEX delivery_intents_completed ON delivery_intents (completed_at) WHERE completed_at IS NOT NULL;
-- Signals: accepted deliveries waiting for a report, and the accepted -> delivered latency.
CREATE INDEX delivery_intents_awaiting_report ON delivery_intents (channel, completed_at)
    WHERE status = 'accepted' AND delivered_at IS NULL;
CREATE INDEX delivery_intents_delivered ON delivery_intents (delivered_at) WHERE delivered_at IS NOT NULL;

-- The attempt log, append-only (the triggers below): one row per observation of an attempt (begun as
-- `attempting`, then its outcome, or `released` when its send never started), keyed by its natural key.
-- attempt_id is '<intent id>:<attempt number>'. Never a token or a destination. No foreign key: every
-- statement that appends a row takes the intent from its own fenced UPDATE ... RETURNING, and
-- no_orphans refuses an intent deleted without its rows.
CREATE TABLE delivery_attempts (
    id               bigint GENERATED ALWAYS AS IDENTITY,
    attempt_id       text NOT NULL,
    intent_id        bigint NOT NULL,
    attempt_number   integer NOT NULL CHECK (attempt_number > 0),
    channel          text NOT NULL,
    template_version text NOT NULL,
    lease_owner      text,
    lease_version    bigint,
    outcome          text NOT NULL CHECK (outcome IN ('attempting', 'accepted', 'retryable', 'ambiguous', 'failed',
                                                      'released')),
    error_class      text,
    error_detail     text CHECK (length(error_detail) <= 500),
    provider_ref     text,
    segments         integer,
    claimed_at       timestamptz,
    attempted_at     timestamptz,
    observed_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT delivery_attempts_pkey PRIMARY KEY (intent_id, attempt_number, outcome),
    CONSTRAINT delivery_attempts_attempt_id_shape CHECK (attempt_id = intent_id || ':' || attempt_number)
);
-- The signals' time window: the log is append-only, so observed_at follows the heap order.
CREATE INDEX delivery_attempts_observed_brin ON delivery_attempts USING brin (observed_at);
-- Linking a provider's report by its reference (SendGrid's X-Message-Id, Twilio's MessageSid).
CREATE INDEX delivery_attempts_provider_ref ON delivery_attempts (provider_ref) WHERE provider_ref IS NOT NULL;
-- SMS's begun and unsent attempts alone: what sms_budget_left read while it counted SMS only (a release
-- that reads them may still run while this one deploys); the text indexes below serve it now.
CREATE INDEX delivery_attempts_sms_begun ON delivery_attempts (observed_at)
    WHERE channel = 'sms' AND outcome = 'attempting';
CREATE INDEX delivery_attempts_sms_unsent ON delivery_attempts (observed_at)
    WHERE channel = 'sms'
      AND (outcome = 'released'
           OR (outcome = 'retryable' AND error_class IN ('not_sent', 'channel_stopped', 'rate_limited')));
-- The phone channels' budgets: sms_budget_left counts SMS and WhatsApp messages (text), voice_budget_left
-- calls; each reads its channels' begun attempts of the hour, and those of them never sent.
CREATE INDEX delivery_attempts_text_begun ON delivery_attempts (observed_at)
    WHERE channel IN ('sms', 'whatsapp') AND outcome = 'attempting';
CREATE INDEX delivery_attempts_text_unsent ON delivery_attempts (observed_at)
    WHERE channel IN ('sms', 'whatsapp')
      AND (outcome = 'released'
           OR (outcome = 'retryable' AND error_class IN ('not_sent', 'channel_stopped', 'rate_limited')));
CREATE INDEX delivery_attempts_voice_begun ON delivery_attempts (observed_at)
    WHERE channel = 'voice' AND outcome = 'attempting';
CREATE INDEX delivery_attempts_voice_unsent ON delivery_attempts (observed_at)
    WHERE channel = 'voice'
      AND (outcome = 'released'
           OR (outcome = 'retryable' AND error_class IN ('not_sent', 'channel_stopped', 'rate_limited')));

-- What the dispatcher and the reconciler keep current for the operator: one row per name
-- ('dispatch:<deployment>', 'reconcile:<deployment>'), the reconciler's watermark included.
CREATE TABLE worker_heartbeats (
    name               text PRIMARY KEY,
    deployment         text NOT NULL,
    last_started_at    timestamptz,
    last_completed_at  timestamptz,
    last_claim_at      timestamptz,
    watermark          jsonb NOT NULL DEFAULT '{}'::jsonb
);

-- The global SMS budget (SMS_MAX_PER_HOUR): an operator's `verifyctl sms resume` grants the current
-- UTC hour another budget's worth.
CREATE TABLE sms_budget_grants (
    hour        timestamptz PRIMARY KEY,
    extra       integer NOT NULL CHECK (extra > 0),
    granted_by  text NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now()
);

-- The call budget (VOICE_MAX_PER_HOUR): an operator's `verifyctl voice resume` grants the current UTC
-- hour another budget's worth.
CREATE TABLE voice_budget_grants (
    hour        timestamptz PRIMARY KEY,
    extra       integer NOT NULL CHECK (extra > 0),
    granted_by  text NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now()
);

-- == delivery ======================================================================================

-- Provider reports (SendGrid's Event Webhook, Twilio's status callbacks), append-only like the attempt
-- log: one row per provider event, linked to its attempt, deduplicated by (provider, dedup_key). Never a
-- destination, a body or a provider's free text: the event, its classification and its code only.
CREATE TABLE delivery_observations (
    id            bigint GENERATED ALWAYS AS IDENTITY CONSTRAINT delivery_observations_pkey PRIMARY KEY,
    provider      text NOT NULL CHECK (provider IN ('sendgrid', 'twilio')),
    dedup_key     text NOT NULL CHECK (length(dedup_key) BETWEEN 1 AND 300),
    intent_id     bigint NOT NULL REFERENCES delivery_intents (id) ON DELETE CASCADE,
    attempt_id    text NOT NULL,
    provider_ref  text CHECK (length(provider_ref) <= 200),
    event         text NOT NULL CHECK (event ~ '^[a-z_]{1,32}$'),
    detail        text CHECK (length(detail) <= 64),    -- bounce type / classification, SMTP status
    error_code    integer,                              -- Twilio ErrorCode
    permanent     boolean NOT NULL DEFAULT false,       -- this event makes the delivery undeliverable
    provider_at   timestamptz,                          -- the provider's own timestamp
    received_at   timestamptz NOT NULL DEFAULT now(),
    fault         text CONSTRAINT delivery_observations_fault
                  CHECK (fault IN ('recipient', 'sender_or_account', 'transient_or_unknown')),
    category      text CONSTRAINT delivery_observations_category CHECK (category ~ '^[a-z_]{1,32}$'),
    -- the verdict's code and the provider its reason names (the sending one): what a settle that
    -- comes after a final report records as the failure's reason (stored_final_reports_v2)
    reason_code   text CONSTRAINT delivery_observations_reason_code CHECK (length(reason_code) <= 64),
    reason_provider text CONSTRAINT delivery_observations_reason_provider CHECK (reason_provider ~ '^[a-z_]{1,32}$'),
    UNIQUE (provider, dedup_key)
);
CREATE INDEX delivery_observations_intent ON delivery_observations (intent_id, id);
CREATE INDEX delivery_observations_received ON delivery_observations (received_at);

-- A run of faults of our side and its hold, per scope: the whole channel (route '': account faults)
-- or one route of it (an SMS destination's country, an email receiving domain: route faults). faults
-- counts the run since window_started_at; attempts a route's sends since; destinations and accounts the
-- distinct keyed digests and account hashes its faults came from (never an address). While
-- held_until is ahead, the claim takes none of the scope's intents.
CREATE TABLE channel_holds (
    channel           text NOT NULL CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice')),
    faults            integer NOT NULL CHECK (faults >= 0),
    window_started_at timestamptz NOT NULL,
    last_fault_at     timestamptz NOT NULL,
    category          text NOT NULL CHECK (category ~ '^[a-z_]{1,32}$'),
    code              text CHECK (length(code) <= 64),
    provider          text CHECK (provider ~ '^[a-z]{1,16}$'),
    held_at           timestamptz,
    held_until        timestamptz,
    route             text NOT NULL DEFAULT ''
                      CONSTRAINT channel_holds_route CHECK (route = '' OR route ~ '^[^@[:space:]]{1,253}$'),
    scope             text GENERATED ALWAYS AS (CASE WHEN route = '' THEN 'account' ELSE 'route' END) STORED,
    attempts          integer NOT NULL DEFAULT 0 CONSTRAINT channel_holds_attempts CHECK (attempts >= 0),
    destinations      bytea[] NOT NULL DEFAULT '{}'
                      CONSTRAINT channel_holds_destinations CHECK (cardinality(destinations) <= 1000),
    accounts          bigint[] NOT NULL DEFAULT '{}'
                      CONSTRAINT channel_holds_accounts CHECK (cardinality(accounts) <= 1000),
    CONSTRAINT channel_holds_pkey PRIMARY KEY (channel, route),
    CONSTRAINT channel_holds_check CHECK ((held_at IS NULL) = (held_until IS NULL))
);

-- A provider asked a channel to slow down (a 429; Twilio 20429): until slow_until no claim takes the
-- channel's intents, which stay eligible. One row per channel; a later, longer wait extends it.
CREATE TABLE channel_pacing (
    channel     text PRIMARY KEY CHECK (channel IN ('email', 'sms', 'whatsapp', 'voice', 'webhook')),
    slow_until  timestamptz NOT NULL,
    seconds     float8 NOT NULL CHECK (seconds >= 0),           -- the pause the provider asked for, last time
    reason      text NOT NULL CHECK (length(reason) <= 200),    -- e.g. 'sendgrid 429: too many requests'
    slowed_at   timestamptz NOT NULL DEFAULT now()
);

-- The dispatch fan-out's invocations, per deployment, while they may run: the scheduled invocation
-- reserves a slot per task it enqueues (fanout_reserve); the task's invocation claims its slot
-- (claimed_by, its own token) and refreshes `until`, and deletes it when it ends; a crashed one stops
-- counting at `until`. Counted to bound the fan-out and share the providers' rates.
CREATE TABLE dispatch_invocations (
    slot        text PRIMARY KEY CHECK (length(slot) <= 200),
    deployment  text NOT NULL,
    started_by  text NOT NULL CHECK (length(started_by) <= 200),  -- the scheduled invocation's lease owner
    reserved_at timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,  -- NULL until its invocation has begun
    until       timestamptz NOT NULL,
    claimed_by  text CONSTRAINT dispatch_invocations_claimed_by CHECK (length(claimed_by) <= 200),
    CONSTRAINT dispatch_invocations_claim CHECK ((claimed_by IS NULL) = (started_at IS NULL))
);
CREATE INDEX dispatch_invocations_live ON dispatch_invocations (deployment, until);

-- name: triggers

-- The attempt log and the provider reports are append-only: UPDATE, DELETE and TRUNCATE are refused
-- except inside the retention purge (delivery_attempts_append_only, outbox/functions/10_integrity.sql).
CREATE TRIGGER delivery_attempts_append_only BEFORE UPDATE OR DELETE ON delivery_attempts
    FOR EACH ROW EXECUTE FUNCTION delivery_attempts_append_only();
CREATE TRIGGER delivery_attempts_no_truncate BEFORE TRUNCATE ON delivery_attempts
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_attempts_append_only();
CREATE TRIGGER delivery_observations_append_only BEFORE UPDATE OR DELETE ON delivery_observations
    FOR EACH ROW EXECUTE FUNCTION delivery_attempts_append_only();
CREATE TRIGGER delivery_observations_no_truncate BEFORE TRUNCATE ON delivery_observations
    FOR EACH STATEMENT EXECUTE FUNCTION delivery_attempts_append_only();
-- What the dropped foreign keys guaranteed on delete (no_orphans, outbox/functions/10_integrity.sql).
CREATE TRIGGER delivery_intents_no_orphans AFTER DELETE ON delivery_intents
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION no_orphans();
CREATE TRIGGER verifications_no_orphans AFTER DELETE ON verifications
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION no_orphans();
