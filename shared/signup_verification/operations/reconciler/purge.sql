-- Purge: redacted verifications whose intent finished before the evidence-retention window are
-- deleted with their intents, create_events and attempt history. None of those has a foreign key
-- (sql/014, sql/015): their rows are deleted here, in this statement (attempts by intent id: their
-- primary key leads with it; intents by verification id), so a purge can never leave
-- an orphan (the DELETE triggers of sql/014, sql/definitions/16_no_orphans.sql, would refuse it). The caller has set
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
    -- create_events has no foreign key either (sql/014): its rows go here too
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
