DROP INDEX IF EXISTS job_runs_callbacks_idx;
ALTER TABLE job_runs
    DROP COLUMN IF EXISTS callback_deadline,
    DROP COLUMN IF EXISTS callback_heartbeat_timeout,
    DROP COLUMN IF EXISTS callback_heartbeat_at,
    DROP COLUMN IF EXISTS callback_accepted_at,
    DROP COLUMN IF EXISTS callback_token_hash;
