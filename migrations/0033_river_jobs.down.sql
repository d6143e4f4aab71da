-- River jobs go with their kind: a definition of kind 'river' would not load on a version
-- that has no River target. 'nats' stays allowed for the migration below this one.
DELETE FROM job_definitions WHERE kind = 'river';
ALTER TABLE job_definitions DROP CONSTRAINT IF EXISTS job_definitions_kind_check;
ALTER TABLE job_definitions ADD CONSTRAINT job_definitions_kind_check
    CHECK (kind IN ('http', 'sql', 'nats'));
