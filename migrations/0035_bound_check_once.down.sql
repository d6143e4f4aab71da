-- The bound's trigger as migration 0034 left it.
CREATE OR REPLACE FUNCTION job_runs_check_bound() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    over text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_runs WHERE status IN ('queued', 'running')) THEN
        RETURN NULL;
    END IF;
    -- A later statement than the lock: its snapshot sees every earlier writer's commit.
    -- The jobs' partitions in one join, not a lookup per row: a claim writes 10 000 rows.
    PERFORM FROM scheduler_locks
    WHERE name IN (SELECT scheduler_active_runs_lock(coalesce(d.partition_id, 0))
                   FROM (SELECT DISTINCT job FROM new_runs WHERE status IN ('queued', 'running')) n
                   LEFT JOIN job_definitions d ON d.name = n.job)
    ORDER BY name
    FOR UPDATE;
    IF (SELECT count(*) FROM new_runs) <= 64 THEN
        SELECT n.job INTO over
        FROM (SELECT DISTINCT job FROM new_runs WHERE status IN ('queued', 'running')) n
        WHERE (SELECT count(*) FROM job_runs r WHERE r.job = n.job AND r.status IN ('queued', 'running'))
              > job_run_bound(n.job)
        LIMIT 1;
    ELSE
        WITH active AS MATERIALIZED (
            SELECT job, count(*) AS n FROM job_runs
            WHERE status IN ('queued', 'running')
              AND partition_id IN (SELECT coalesce(d.partition_id, 0)
                                   FROM (SELECT DISTINCT job FROM new_runs) n
                                   LEFT JOIN job_definitions d ON d.name = n.job
                                   UNION SELECT partition_id FROM new_runs)
            GROUP BY job
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
