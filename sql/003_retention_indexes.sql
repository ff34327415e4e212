-- Indexes for the reconciler's evidence-retention sweep (shared/signup_verification/reconciler/).
-- Each lets a sweep read what it moves rather than the history.

-- Redaction candidates: verifications that still hold a destination, oldest first.
CREATE INDEX verifications_unredacted ON verifications (created_at) WHERE destination IS NOT NULL;

-- Deleting a verification checks that no other one names it in superseded_by; without this index
-- every purged row costs a scan of the whole table (the foreign key has no index of its own).
CREATE INDEX verifications_superseded_by ON verifications (superseded_by) WHERE superseded_by IS NOT NULL;
