-- Retention: redaction and the purge that spans owners: one file of the operations package's named
-- statements (platform/catalogue.py).

-- name: retention_unlock
-- Inside a retention batch's transaction only: the one way past the attempt log's append-only
-- trigger (redact scrubs error texts, purge deletes whole histories).
SET LOCAL signup_verification.retention_purge = 'on'

-- name: redact
-- Redact: finished verifications older than the destination-retention window lose their destination
-- (verifications.destination = NULL, redacted_at set). A provider error text that quoted the address
-- ("550 5.1.1 <ada@example.com> unknown") is scrubbed from the intent and its attempt rows in the
-- same statement; the caller has set signup_verification.retention_purge for the attempt log.
-- Reads verifications_unredacted (created_at WHERE destination IS NOT NULL): what it redacts.
WITH due AS (
    SELECT v.id, v.destination FROM verifications AS v
     WHERE v.destination IS NOT NULL
       AND v.created_at < now() - make_interval(secs => :redact_after_seconds)
       AND v.status <> 'pending'
       -- its delivery finished: a per-row probe of the unique verification_id index (written as a
       -- scalar subquery: as NOT EXISTS the planner may hash a scan of every intent instead);
       -- every intent of it (bool_and: a verification may own several, its webhook events too)
       AND coalesce((SELECT bool_and(i.completed_at IS NOT NULL) FROM delivery_intents AS i
                      WHERE i.verification_id = v.id), true)
     ORDER BY v.created_at
     LIMIT :limit
       FOR UPDATE OF v SKIP LOCKED
), pattern AS (
    -- the destination as a literal regular expression (every non-alphanumeric escaped);
    -- a fallback intent's own destination for it (the one its provider errors may quote)
    SELECT d.id, i.id AS intent_id, i.last_error ~* r.re AS quoted, r.re
      FROM due AS d JOIN delivery_intents AS i ON i.verification_id = d.id
     CROSS JOIN LATERAL (SELECT regexp_replace(coalesce(i.destination, d.destination), '([^A-Za-z0-9])', '\\\1', 'g') AS re) AS r
), scrubbed_intents AS (
    -- a fallback's destination is redacted with the verification's, in this one UPDATE
    UPDATE delivery_intents AS i
       SET last_error = CASE WHEN p.quoted THEN regexp_replace(i.last_error, p.re, '[redacted]', 'gi') ELSE i.last_error END,
           destination = NULL
      FROM pattern AS p
     WHERE i.id = p.intent_id AND (p.quoted OR i.destination IS NOT NULL)
    RETURNING i.id, p.quoted
), scrubbed_attempts AS (
    UPDATE delivery_attempts AS a
       SET error_detail = regexp_replace(a.error_detail, p.re, '[redacted]', 'gi')
      FROM pattern AS p
     WHERE a.intent_id = p.intent_id AND a.error_detail ~* p.re
    RETURNING a.id
)
UPDATE verifications AS v
   SET destination = NULL, redacted_at = now(), updated_at = now()
  FROM due
 WHERE v.id = due.id
RETURNING v.id, (SELECT count(*) FROM scrubbed_intents WHERE quoted) + (SELECT count(*) FROM scrubbed_attempts) AS scrubbed

-- name: purge
-- Purge: redacted verifications whose intent finished before the evidence-retention window are
-- deleted with their intents, create_events and attempt history. None of those has a foreign key
-- (no_orphans): their rows are deleted here, in this statement (attempts by intent id: their
-- primary key leads with it; intents by verification id), so a purge can never leave
-- an orphan (the DELETE triggers calling no_orphans would refuse it). The caller has set
-- signup_verification.retention_purge so the attempt log's append-only trigger lets the rows go.
-- Only finished intents are purged, and no statement appends an attempt row for a finished intent
-- (each one appends for the intent its fenced UPDATE just moved), so none can arrive afterwards.
-- Reads delivery_intents_completed (completed_at): what it purges. A verification still named as
-- superseded_by of one that stays is kept for a later batch (superseded_by's foreign key would refuse it).
WITH due AS (
    SELECT i.verification_id AS id
      FROM delivery_intents AS i
      JOIN verifications AS v ON v.id = i.verification_id
     WHERE i.completed_at < now() - make_interval(secs => :purge_after_seconds)
       AND v.redacted_at IS NOT NULL
       -- several intents per verification (events, fallback): all of them past it
       AND NOT EXISTS (SELECT 1 FROM delivery_intents AS o
                        WHERE o.verification_id = i.verification_id
                          AND (o.completed_at IS NULL
                               OR o.completed_at >= now() - make_interval(secs => :purge_after_seconds)))
     ORDER BY i.completed_at
     LIMIT :limit
), purgeable AS (
    SELECT DISTINCT d.id FROM due AS d
     WHERE NOT EXISTS (SELECT 1 FROM verifications AS w
                        WHERE w.superseded_by = d.id AND w.id NOT IN (SELECT id FROM due))
), events_gone AS (
    -- create_events has no foreign key either: its rows go here too
    DELETE FROM create_events AS e USING purgeable AS p WHERE e.verification_id = p.id
), intents_gone AS (
    DELETE FROM delivery_intents AS i USING purgeable AS p WHERE i.verification_id = p.id
), attempts_gone AS (
    DELETE FROM delivery_attempts AS a
     USING purgeable AS p, delivery_intents AS i
     WHERE i.verification_id = p.id AND a.intent_id = i.id
)
DELETE FROM verifications AS v
 USING purgeable AS p
 WHERE v.id = p.id
RETURNING v.id, (SELECT count(*) FROM due) AS examined
