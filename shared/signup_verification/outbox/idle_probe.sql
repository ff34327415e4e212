-- idle probe: is there anything the claim would take now, and has a newer invocation taken over the
-- waiting (idle_enter.sql)? One probe per channel of the eligible partial index (delivery_intents_eligible,
-- (channel, next_attempt_at, id): the first due row of the channel's range): on an empty outbox each
-- finds nothing, and the only other read is the dispatch heartbeat row by primary key. The SMS budget
-- (sql/definitions/07) is read only when an SMS intent is due: past the budget those stay eligible but
-- the claim would not take them, so they must not wake the worker (it would claim nothing, every poll);
-- so must the intents of a held channel (sql/definitions/20) or a slowed one (its provider answered
-- 429, sql/definitions/23), read only when one is due.
SELECT ((EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'email')
         AND NOT channel_held('email') AND NOT channel_slowed('email'))
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'webhook') AND NOT channel_slowed('webhook'))
        OR (EXISTS (SELECT 1 FROM eligible_delivery_intents WHERE channel = 'sms')
            AND NOT channel_held('sms') AND NOT channel_slowed('sms')
            AND (SELECT sms_budget_left(CAST(:sms_max AS integer))) IS DISTINCT FROM 0)) AS waiting,
       coalesce((SELECT watermark ->> 'idle_owner' FROM worker_heartbeats WHERE name = :name), :owner)
           <> :owner AS superseded
