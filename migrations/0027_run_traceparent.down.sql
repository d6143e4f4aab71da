ALTER TABLE job_runs DROP COLUMN traceparent;
