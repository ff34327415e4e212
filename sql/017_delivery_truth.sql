-- What the service tells the site: which secret proved a verification, and for every delivery that
-- failed for good, why and whose fault it was.
--
-- 1. The proof. `verified_channel` is the channel whose secret confirmed the verification (the
--    email's link or the SMS code), `verified_via` how (`link` | `code`). `channel` stays the primary
--    channel requested. Rows verified before this migration without a fallback had one secret only,
--    so their proof is known and is filled in; a verified row with a fallback keeps NULL (which of
--    its two secrets was used was not recorded).
ALTER TABLE verifications
    ADD COLUMN verified_channel text CONSTRAINT verifications_verified_channel CHECK (verified_channel IN ('email', 'sms')),
    ADD COLUMN verified_via text CONSTRAINT verifications_verified_via CHECK (verified_via IN ('link', 'code')),
    ADD CONSTRAINT verifications_proof CHECK (
        (verified_channel IS NULL) = (verified_via IS NULL)
        AND (verified_via IS NULL OR (verified_via = 'link') = (verified_channel = 'email'))
        AND (verified_channel IS NULL OR status = 'verified'));
UPDATE verifications
   SET verified_channel = channel, verified_via = CASE channel WHEN 'email' THEN 'link' ELSE 'code' END
 WHERE status = 'verified' AND fallback_channel IS NULL;

-- 2. A failure for good, answered twice: the category of the documented vocabulary
--    (docs/channels.md, delivery/classification/), the provider's code, the provider, and whose
--    fault it was. `failed_at` is when the delivery failed (at submission, at the end of its
--    attempts, or later by a provider's report: `undeliverable_reason` is set then, as before).
--    `event_subject` is the delivery (its channel) a per-delivery webhook event reports.
ALTER TABLE delivery_intents
    ADD COLUMN failed_at timestamptz,
    ADD COLUMN failure_category text CONSTRAINT delivery_intents_failure_category CHECK (failure_category ~ '^[a-z_]{1,32}$'),
    ADD COLUMN failure_code text CONSTRAINT delivery_intents_failure_code CHECK (length(failure_code) BETWEEN 1 AND 64),
    ADD COLUMN failure_provider text CONSTRAINT delivery_intents_failure_provider CHECK (failure_provider ~ '^[a-z]{1,16}$'),
    ADD COLUMN failure_fault text
        CONSTRAINT delivery_intents_failure_fault CHECK (failure_fault IN ('recipient', 'sender_or_account', 'transient_or_unknown')),
    ADD COLUMN event_subject text CONSTRAINT delivery_intents_event_subject CHECK (event_subject IN ('email', 'sms')),
    ADD CONSTRAINT delivery_intents_failure_failed CHECK (
        (failure_category IS NULL OR status = 'failed') AND (failed_at IS NULL OR status = 'failed')),
    ADD CONSTRAINT delivery_intents_subject_event CHECK (event_subject IS NULL OR role = 'event');
UPDATE delivery_intents SET failed_at = completed_at WHERE status = 'failed' AND role <> 'event';

-- The event types a site may ask for (WEBHOOK_EVENTS): the per-delivery ones are opt-in.
ALTER TABLE delivery_intents DROP CONSTRAINT delivery_intents_event_types;
ALTER TABLE delivery_intents
    ADD CONSTRAINT delivery_intents_event_types CHECK (
        event_type IS NULL
        OR event_type IN ('verification.verified', 'verification.expired', 'verification.locked', 'delivery.failed',
                          'delivery.delivered', 'delivery.bounced'));

-- 3. Provider reports answer the same two questions: `permanent` (the message will never arrive)
--    keeps its meaning; `fault` and `category` are new. Only a `recipient` fault suppresses.
ALTER TABLE delivery_observations
    ADD COLUMN fault text
        CONSTRAINT delivery_observations_fault CHECK (fault IN ('recipient', 'sender_or_account', 'transient_or_unknown')),
    ADD COLUMN category text CONSTRAINT delivery_observations_category CHECK (category ~ '^[a-z_]{1,32}$');

-- 4. Suppressions name one exact mailbox or number. `key_kind` 'exact': the keyed digest of the
--    address canonicalised only in ways that never merge two mailboxes (lower-cased domain, IDNA,
--    NFC; verifications/abuse.py exact_email). The rate limits keep their alias-folding key.
--    Entries written before this migration are keyed on the alias key; an SMS number's alias key is
--    its exact key (E.164), so those become 'exact'. An email entry's exact address is unknown: it
--    stays an 'alias' entry, matched on the alias key, until it expires, and one that had no expiry
--    expires 30 days from now (docs/security.md).
ALTER TABLE destination_suppressions
    ADD COLUMN key_kind text NOT NULL DEFAULT 'alias'
        CONSTRAINT destination_suppressions_key_kind CHECK (key_kind IN ('exact', 'alias')),
    ADD COLUMN category text CONSTRAINT destination_suppressions_category CHECK (category ~ '^[a-z_]{1,32}$');
ALTER TABLE destination_suppressions ALTER COLUMN key_kind SET DEFAULT 'exact';
UPDATE destination_suppressions SET key_kind = 'exact' WHERE channel = 'sms';
UPDATE destination_suppressions SET expires_at = now() + interval '30 days'
 WHERE key_kind = 'alias' AND expires_at IS NULL;

-- The exact key of each message destination, beside the alias key the limits count on: NULL where
-- the two are the same digest (every number, and every address typed in its canonical form), so
-- most rows carry nothing more.
ALTER TABLE create_events
    ADD COLUMN exact_key bytea CONSTRAINT create_events_exact_key CHECK (length(exact_key) = 32);

-- 5. Channel holds: a channel whose sends keep failing for a sender or account fault (bad
--    credentials, an unregistered sender, an exhausted quota) stops until an operator resumes it
--    (`verifyctl channel resume`) or `held_until` passes. `faults` counts the run inside the window
--    that started at `window_started_at` (sql/definitions/19_record_sender_faults.sql).
CREATE TABLE channel_holds (
    channel           text PRIMARY KEY CHECK (channel IN ('email', 'sms')),
    faults            integer NOT NULL CHECK (faults >= 0),
    window_started_at timestamptz NOT NULL,
    last_fault_at     timestamptz NOT NULL,
    category          text NOT NULL CHECK (category ~ '^[a-z_]{1,32}$'),
    code              text CHECK (length(code) <= 64),
    provider          text CHECK (provider ~ '^[a-z]{1,16}$'),
    held_at           timestamptz,
    held_until        timestamptz,
    CHECK ((held_at IS NULL) = (held_until IS NULL))
);
