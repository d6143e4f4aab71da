-- River jobs (issue 46): a runtime job of kind 'river' inserts one River job per slot into a
-- SQL target's database. 'nats' is listed too, so that this migration and the one that adds
-- NATS jobs leave the same check whichever order they run in.
ALTER TABLE job_definitions DROP CONSTRAINT IF EXISTS job_definitions_kind_check;
ALTER TABLE job_definitions ADD CONSTRAINT job_definitions_kind_check
    CHECK (kind IN ('http', 'sql', 'nats', 'river'));
