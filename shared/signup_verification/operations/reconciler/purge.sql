-- Purge: redacted verifications whose intent finished before the evidence-retention window are
-- deleted with their intent and attempt history (ON DELETE CASCADE; the caller has set
-- signup_verification.retention_purge so the attempt log's append-only trigger lets the rows go).
-- Reads delivery_intents_completed (completed_at): what it purges. A verification still named as
-- superseded_by of one that stays is kept for a later batch (the foreign key would refuse it).
WITH due AS (
    SELECT i.verification_id AS id
      FROM delivery_intents AS i
      JOIN verifications AS v ON v.id = i.verification_id
     WHERE i.completed_at < now() - make_interval(secs => :purge_after_seconds)
       AND v.redacted_at IS NOT NULL
       -- several intents per verification (issue 12's events, issue 14's fallback): all of them past it
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
)
DELETE FROM verifications AS v
 USING purgeable AS p
 WHERE v.id = p.id
RETURNING v.id, (SELECT count(*) FROM due) AS examined
