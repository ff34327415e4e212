-- migrate: no-transaction
-- Calls have an hourly budget of their own (voice_budget_left, VOICE_MAX_PER_HOUR) with its
-- operator's grants, and WhatsApp messages count in the SMS budget (sms_budget_left): each budget
-- reads its channels' begun and unsent attempts of the hour on partial indexes of its own (text: SMS
-- and WhatsApp; voice), as the SMS budget read SMS's. Built concurrently (the attempt log is large and written all the time); each statement may
-- run again after a failure half way.
CREATE TABLE IF NOT EXISTS voice_budget_grants (
    hour        timestamptz PRIMARY KEY,
    extra       integer NOT NULL CHECK (extra > 0),
    granted_by  text NOT NULL,
    granted_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX CONCURRENTLY IF NOT EXISTS delivery_attempts_text_begun ON delivery_attempts (observed_at)
    WHERE channel IN ('sms', 'whatsapp') AND outcome = 'attempting';
CREATE INDEX CONCURRENTLY IF NOT EXISTS delivery_attempts_text_unsent ON delivery_attempts (observed_at)
    WHERE channel IN ('sms', 'whatsapp')
      AND (outcome = 'released'
           OR (outcome = 'retryable' AND error_class IN ('not_sent', 'channel_stopped', 'rate_limited')));
CREATE INDEX CONCURRENTLY IF NOT EXISTS delivery_attempts_voice_begun ON delivery_attempts (observed_at)
    WHERE channel = 'voice' AND outcome = 'attempting';
CREATE INDEX CONCURRENTLY IF NOT EXISTS delivery_attempts_voice_unsent ON delivery_attempts (observed_at)
    WHERE channel = 'voice'
      AND (outcome = 'released'
           OR (outcome = 'retryable' AND error_class IN ('not_sent', 'channel_stopped', 'rate_limited')));
