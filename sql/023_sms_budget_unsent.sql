-- The SMS budget counts messages, not begun attempts: an attempt that ended without reaching Twilio
-- gives its place back (sms_budget_left, sql/definitions/07). Those attempts end `released` (begun
-- by the claim, never started) or `retryable` with an error class of delivery/sending.py's
-- NOT_ATTEMPTED (no time left, the channel stopped, a 429 / 20429 refused before processing). They
-- are few, so the budget reads them on an index of their own.
CREATE INDEX delivery_attempts_sms_unsent ON delivery_attempts (observed_at)
    WHERE channel = 'sms'
      AND (outcome = 'released'
           OR (outcome = 'retryable' AND error_class IN ('not_sent', 'channel_stopped', 'rate_limited')));
