ALTER TABLE job_runs DROP COLUMN IF EXISTS next_attempt_at;
