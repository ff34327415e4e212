-- Provider reports ingested (delivery/reports.py): one file of the delivery package's named statements
-- (platform/catalogue.py).

-- name: reports_ingest
-- One verified batch of provider reports: stored, linked and applied in one round trip and one
-- transaction (ingest_delivery_reports). suppress_seconds NULL: a
-- suppression lasts until an operator clears it; the hold thresholds are outbox/config.py's FailurePolicy.
SELECT received, stored, duplicates, unknown, delivered, undeliverable, suppressed, sender_faults, held,
       route_faults, routes_held
  FROM ingest_delivery_reports(:provider, CAST(:events AS jsonb),
                               make_interval(secs => CAST(:suppress_seconds AS float8)),
                               CAST(:hold_after AS integer), make_interval(secs => CAST(:hold_window AS float8)),
                               make_interval(secs => CAST(:hold_seconds AS float8)),
                               CAST(:route_min_destinations AS integer), CAST(:route_min_share AS float8))
