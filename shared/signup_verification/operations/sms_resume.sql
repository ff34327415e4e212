-- verifyctl sms resume: grant the current UTC hour another budget's worth of SMS.
INSERT INTO sms_budget_grants (hour, extra, granted_by)
VALUES (date_trunc('hour', now(), 'UTC'), :extra, :granted_by)
ON CONFLICT (hour) DO UPDATE SET extra = sms_budget_grants.extra + EXCLUDED.extra,
                                 granted_by = EXCLUDED.granted_by, granted_at = now()
RETURNING sms_budget_left(CAST(:sms_max AS integer)) + :extra AS sms_budget_left
