DROP INDEX IF EXISTS job_runs_partition_active_idx;

-- Migration 0021's checks, under the one lock row of all partitions.
CREATE OR REPLACE FUNCTION job_runs_check_bound() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    over text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_runs WHERE status IN ('queued', 'running')) THEN
        RETURN NULL;
    END IF;
    PERFORM FROM scheduler_locks WHERE name = 'scheduler:active_runs' FOR UPDATE;
    IF (SELECT count(*) FROM new_runs) <= 64 THEN
        SELECT n.job INTO over
        FROM (SELECT DISTINCT job FROM new_runs WHERE status IN ('queued', 'running')) n
        WHERE (SELECT count(*) FROM job_runs r WHERE r.job = n.job AND r.status IN ('queued', 'running'))
              > job_run_bound(n.job)
        LIMIT 1;
    ELSE
        WITH active AS MATERIALIZED (
            SELECT job, count(*) AS n FROM job_runs WHERE status IN ('queued', 'running') GROUP BY job
        )
        SELECT a.job INTO over
        FROM active a
        JOIN (SELECT DISTINCT job FROM new_runs WHERE status IN ('queued', 'running')) n ON n.job = a.job
        LEFT JOIN job_definitions d ON d.name = a.job
        WHERE a.n > coalesce(d.max_concurrent, 1)
        LIMIT 1;
    END IF;
    IF over IS NOT NULL THEN
        RAISE EXCEPTION 'job % would have more queued or running runs than its bound (%)', over, job_run_bound(over)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_runs_active_bound';
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION job_runs_check_reactivated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM FROM scheduler_locks WHERE name = 'scheduler:active_runs' FOR UPDATE;
    IF (SELECT count(*) FROM job_runs r WHERE r.job = NEW.job AND r.status IN ('queued', 'running'))
       >= job_run_bound(NEW.job) THEN
        RAISE EXCEPTION 'job % would have more queued or running runs than its bound (%)', NEW.job, job_run_bound(NEW.job)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_runs_active_bound';
    END IF;
    RETURN NEW;
END $$;

DELETE FROM scheduler_locks WHERE name LIKE 'scheduler:active_runs:%';
DROP FUNCTION IF EXISTS scheduler_active_runs_lock(int);
DROP FUNCTION IF EXISTS job_run_partition(text);
