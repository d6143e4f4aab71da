-- The bound's trigger reads each written job's definition once, and looks up a job's bound
-- only when the job has more than one active run. Migration 0034's trigger joined a
-- statement's distinct jobs to job_definitions three times (its partitions to lock, its
-- partitions to count, its bound), and each claim of a 100 000-job minute writes about
-- 1 600 rows: a third of the claims' time went to the trigger
-- (store's BenchmarkClaimMinute100k). A bound is at least 1, so a job with one active run
-- is within it whatever its definition says.
CREATE OR REPLACE FUNCTION job_runs_check_bound() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    over text;
    locked int[];  -- the partitions of the written jobs' definitions (0: none)
    counted int[]; -- those, and the partitions the new rows name
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_runs WHERE status IN ('queued', 'running')) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(DISTINCT coalesce(d.partition_id, 0)) INTO locked
    FROM (SELECT DISTINCT job FROM new_runs WHERE status IN ('queued', 'running')) n
    LEFT JOIN job_definitions d ON d.name = n.job;
    -- A later statement than the lock: its snapshot sees every earlier writer's commit.
    PERFORM FROM scheduler_locks
    WHERE name IN (SELECT scheduler_active_runs_lock(p) FROM unnest(locked) AS p)
    ORDER BY name
    FOR UPDATE;
    IF (SELECT count(*) FROM new_runs) <= 64 THEN
        SELECT n.job INTO over
        FROM (SELECT DISTINCT job FROM new_runs WHERE status IN ('queued', 'running')) n
        WHERE (SELECT count(*) FROM job_runs r WHERE r.job = n.job AND r.status IN ('queued', 'running'))
              > job_run_bound(n.job)
        LIMIT 1;
    ELSE
        SELECT array_agg(DISTINCT p) INTO counted
        FROM (SELECT unnest(locked) AS p UNION SELECT partition_id FROM new_runs) parts;
        WITH active AS MATERIALIZED (
            SELECT job, count(*) AS n FROM job_runs
            WHERE status IN ('queued', 'running') AND partition_id = ANY (counted)
            GROUP BY job
            HAVING count(*) > 1
        )
        SELECT a.job INTO over
        FROM active a
        LEFT JOIN job_definitions d ON d.name = a.job
        WHERE a.n > coalesce(d.max_concurrent, 1)
          AND EXISTS (SELECT 1 FROM new_runs n WHERE n.job = a.job AND n.status IN ('queued', 'running'))
        LIMIT 1;
    END IF;
    IF over IS NOT NULL THEN
        RAISE EXCEPTION 'job % would have more queued or running runs than its bound (%)', over, job_run_bound(over)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_runs_active_bound';
    END IF;
    RETURN NULL;
END $$;
