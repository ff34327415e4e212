-- One verified batch of provider reports: stored, linked and applied in one round trip and one
-- transaction (sql/definitions/13_ingest_delivery_reports.sql). suppress_seconds NULL: a
-- suppression lasts until an operator clears it; the hold thresholds are outbox/failure_policy.py's.
SELECT received, stored, duplicates, unknown, delivered, undeliverable, suppressed, sender_faults, held
  FROM ingest_delivery_reports(:provider, CAST(:events AS jsonb),
                               make_interval(secs => CAST(:suppress_seconds AS float8)),
                               CAST(:hold_after AS integer), make_interval(secs => CAST(:hold_window AS float8)),
                               make_interval(secs => CAST(:hold_seconds AS float8)))
