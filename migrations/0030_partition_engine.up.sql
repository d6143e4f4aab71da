-- One engine per partition (docs/design.md, "Partitions"): each partition's leader reads only
-- its own runs, and the partitions' claims no longer wait for one another.

-- The partition of a job: its definition's, 0 for a built-in job (which has none). The API's
-- queued runs are written into it, and its active runs' lock is chosen by it.
CREATE FUNCTION job_run_partition(job text) RETURNS int
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN coalesce((SELECT d.partition_id FROM job_definitions d WHERE d.name = job), 0);

-- The lock row of partition p's active runs (store.activeRunsLockOf names the same rows):
-- partition 0 keeps the one row every writer took before, so a one-partition cluster locks as
-- it did.
CREATE FUNCTION scheduler_active_runs_lock(p int) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE WHEN p = 0 THEN 'scheduler:active_runs' ELSE 'scheduler:active_runs:' || p END;

INSERT INTO scheduler_locks (name)
SELECT scheduler_active_runs_lock(p) FROM generate_series(1, 1023) AS p
ON CONFLICT DO NOTHING;

-- job_runs_check_bound of migration 0021, taking the lock of each written job's partition
-- rather than the one row of all: a job's bound is counted among its own runs only, and a job
-- lives in one partition, so writers of different partitions never need each other's lock.
-- The locks are taken in name order, as a writer of several partitions must.
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
    PERFORM FROM scheduler_locks WHERE name = scheduler_active_runs_lock(job_run_partition(NEW.job)) FOR UPDATE;
    IF (SELECT count(*) FROM job_runs r WHERE r.job = NEW.job AND r.status IN ('queued', 'running'))
       >= job_run_bound(NEW.job) THEN
        RAISE EXCEPTION 'job % would have more queued or running runs than its bound (%)', NEW.job, job_run_bound(NEW.job)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_runs_active_bound';
    END IF;
    RETURN NEW;
END $$;

-- A partition's leader looks for its queued runs (oldest first), its running runs (the
-- rescue, the cancel requests): few rows at any time, found by partition. On the parent, so
-- every day partition, the ones made later too, gets it.
CREATE INDEX job_runs_partition_active_idx ON job_runs (partition_id, id)
    WHERE status IN ('queued', 'running');
