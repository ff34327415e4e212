-- The operator's SMS and voice budget grants (operations/budgets.py): one file of the outbox package's
-- named statements (platform/catalogue.py).

-- name: sms_grant
-- verifyctl sms resume: grant the current UTC hour another budget's worth of SMS.
INSERT INTO sms_budget_grants (hour, extra, granted_by)
VALUES (date_trunc('hour', now(), 'UTC'), :extra, :granted_by)
ON CONFLICT (hour) DO UPDATE SET extra = sms_budget_grants.extra + EXCLUDED.extra,
                                 granted_by = EXCLUDED.granted_by, granted_at = now()
RETURNING sms_budget_left(CAST(:sms_max AS integer)) + :extra AS budget_left

-- name: voice_grant
-- verifyctl voice resume: grant the current UTC hour another budget's worth of calls.
INSERT INTO voice_budget_grants (hour, extra, granted_by)
VALUES (date_trunc('hour', now(), 'UTC'), :extra, :granted_by)
ON CONFLICT (hour) DO UPDATE SET extra = voice_budget_grants.extra + EXCLUDED.extra,
                                 granted_by = EXCLUDED.granted_by, granted_at = now()
RETURNING voice_budget_left(CAST(:voice_max AS integer)) + :extra AS budget_left
