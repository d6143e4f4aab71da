DROP FUNCTION IF EXISTS job_run_slot(bigint);
DROP FUNCTION IF EXISTS job_slot_runs(text, timestamptz);
DROP TABLE IF EXISTS scheduler_after_waiting;
DELETE FROM job_runs WHERE trigger = 'after';
ALTER TABLE job_runs DROP CONSTRAINT IF EXISTS job_runs_after_check;
ALTER TABLE job_runs DROP CONSTRAINT job_runs_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_check
    CHECK (scheduled_at IS NULL OR trigger IN ('schedule', 'catch-up', 'rerun', 'backfill'));
ALTER TABLE job_runs DROP CONSTRAINT job_runs_trigger_check;
ALTER TABLE job_runs ADD CONSTRAINT job_runs_trigger_check
    CHECK (trigger IN ('schedule', 'manual', 'catch-up', 'recovery', 'rerun', 'backfill'));
ALTER TABLE job_runs DROP COLUMN IF EXISTS parent_run_ids;
DROP INDEX IF EXISTS job_definitions_after_keys_idx;
ALTER TABLE job_definitions DROP COLUMN IF EXISTS after_keys;
DROP FUNCTION IF EXISTS job_after_keys(text, jsonb);
