-- One verified batch of provider reports: stored, linked and applied in one round trip and one
-- transaction (sql/definitions/13_ingest_delivery_reports.sql). suppress_seconds NULL: a
-- suppression lasts until an operator clears it.
SELECT received, stored, duplicates, unknown, delivered, undeliverable, suppressed
  FROM ingest_delivery_reports(:provider, CAST(:events AS jsonb),
                               make_interval(secs => CAST(:suppress_seconds AS float8)))
