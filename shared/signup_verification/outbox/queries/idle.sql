-- The dispatcher's idle wait: the probe of the eligible index and the waiting invocation: one file of
-- the outbox package's named statements (platform/catalogue.py).

-- name: idle_probe
-- idle probe: is there anything the claim would take now, and has a newer invocation taken over the
-- waiting (outbox/queries/idle.sql:idle_enter)? One probe per channel of the eligible partial index (delivery_intents_eligible,
-- (channel, next_attempt_at, id): the first due row of the channel's range): on an empty outbox each
-- finds nothing, and the only other read is the dispatch heartbeat row by primary key. The SMS budget
-- (sms_budget_left, SMS and WhatsApp) and the call budget (voice_budget_left) are read only when an
-- intent they cover is due: past the budget those stay eligible but
-- the claim would not take them, so they must not wake the worker (it would claim nothing, every poll);
-- so must the intents of a held channel (channel_held) or a slowed one (its provider answered
-- 429, channel_slowed), read only when one is due.
SELECT ((EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'email')
         AND NOT channel_held('email') AND NOT channel_slowed('email'))
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'webhook') AND NOT channel_slowed('webhook'))
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'sms')
            AND NOT channel_held('sms') AND NOT channel_slowed('sms')
            AND (SELECT sms_budget_left(CAST(:sms_max AS integer))) IS DISTINCT FROM 0)
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'whatsapp')
            AND NOT channel_held('whatsapp') AND NOT channel_slowed('whatsapp')
            AND (SELECT sms_budget_left(CAST(:sms_max AS integer))) IS DISTINCT FROM 0)
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'voice')
            AND NOT channel_held('voice') AND NOT channel_slowed('voice')
            AND (SELECT voice_budget_left(CAST(:voice_max AS integer))) IS DISTINCT FROM 0)) AS waiting,
       coalesce((SELECT watermark ->> 'idle_owner' FROM worker_heartbeats WHERE name = :name), :owner)
           <> :owner AS superseded

-- name: idle_enter
-- An invocation starts waiting for work: it becomes the deployment's idle waiter unless a newer
-- invocation (by start time, the database clock) already is. The older waiter sees this in its next
-- probe (outbox/queries/idle.sql:idle_probe: superseded) and returns, so the scheduler's next tick hands the waiting
-- over without a gap and without two instances waiting for long. An owner that died simply has
-- an older start and is replaced.
INSERT INTO worker_heartbeats (name, deployment, watermark)
VALUES (:name, :deployment, jsonb_build_object(
        'idle_owner', CAST(:owner AS text),
        'idle_owner_started', now() - make_interval(secs => :elapsed)))
ON CONFLICT (name) DO UPDATE
   SET watermark = worker_heartbeats.watermark || EXCLUDED.watermark
 WHERE coalesce(CAST(worker_heartbeats.watermark ->> 'idle_owner_started' AS timestamptz), '-infinity')
       <= CAST(EXCLUDED.watermark ->> 'idle_owner_started' AS timestamptz)
