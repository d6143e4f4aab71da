-- Without the kind, NATS jobs' definitions cannot stay; their runs (history) do.
DELETE FROM job_definitions WHERE kind = 'nats';
ALTER TABLE job_definitions DROP CONSTRAINT job_definitions_kind_check;
ALTER TABLE job_definitions ADD CONSTRAINT job_definitions_kind_check CHECK (kind IN ('http', 'sql'));
