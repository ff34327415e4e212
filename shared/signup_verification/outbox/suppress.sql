-- suppress: the undelivered intents of dead verifications become suppressed with the reason
-- (the shared function of sql/definitions/03_suppress_undelivered_intents.sql, which create uses too). Returns the suppressed intent ids.
SELECT suppress_undelivered_intents(:ids::uuid[], :reason)
