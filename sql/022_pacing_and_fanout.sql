-- Provider pacing and the dispatch fan-out (shared/signup_verification/delivery/pacing.py, fanout.py).
--
-- 1. channel_pacing: a provider answered 429 (Twilio: 20429) for a channel; until `slow_until` no
--    invocation's claim takes the channel's intents (outbox/claim.sql, through channel_slowed() in
--    sql/definitions/23). They stay eligible: nothing fails, no attempt is charged. One row per
--    channel, written by the dispatcher that met the 429 (a later, longer wait extends it).
CREATE TABLE channel_pacing (
    channel     text PRIMARY KEY CHECK (channel IN ('email', 'sms', 'webhook')),
    slow_until  timestamptz NOT NULL,
    seconds     float8 NOT NULL CHECK (seconds >= 0),  -- the pause the provider asked for, last time
    reason      text NOT NULL CHECK (length(reason) <= 200),  -- e.g. 'sendgrid 429: too many requests'
    slowed_at   timestamptz NOT NULL DEFAULT now()
);

-- 2. dispatch_invocations: the invocations the fan-out started, per deployment, while they may run.
--    The invocation the scheduler started reserves a row per task it enqueues (sql/definitions/24);
--    the task's invocation refreshes `until` to its own deadline when it starts and deletes the row
--    when it ends. A crashed one stops counting at `until`. Counted to bound the fan-out
--    (DISPATCH_MAX_PARALLEL) and to share the providers' rates among the invocations sending.
CREATE TABLE dispatch_invocations (
    slot        text PRIMARY KEY CHECK (length(slot) <= 200),
    deployment  text NOT NULL,
    started_by  text NOT NULL CHECK (length(started_by) <= 200),  -- the scheduled invocation's lease owner
    reserved_at timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,  -- NULL until its invocation has begun
    until       timestamptz NOT NULL
);
CREATE INDEX dispatch_invocations_live ON dispatch_invocations (deployment, until);
