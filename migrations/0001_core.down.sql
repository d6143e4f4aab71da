DROP TABLE IF EXISTS idempotency_keys;
DROP TABLE IF EXISTS job_runs;
DROP FUNCTION IF EXISTS job_runs_notify_queued();
DROP TABLE IF EXISTS job_settings;
DROP TABLE IF EXISTS scheduler_instances;
DROP TABLE IF EXISTS scheduler_leader;
