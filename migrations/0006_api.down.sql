DROP INDEX IF EXISTS job_runs_job_trigger_id_idx;
DROP INDEX IF EXISTS job_runs_job_status_id_idx;
