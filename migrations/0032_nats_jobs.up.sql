-- A runtime job may publish to a NATS JetStream stream (kind 'nats', internal/runtimejob).
ALTER TABLE job_definitions DROP CONSTRAINT job_definitions_kind_check;
ALTER TABLE job_definitions ADD CONSTRAINT job_definitions_kind_check CHECK (kind IN ('http', 'sql', 'nats'));
